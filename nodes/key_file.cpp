// Key files (POSIX I/O). See key_file.h; docs/running.md.
#include "nodes/key_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace tribunal {
namespace {

constexpr std::string_view kKeyFileHeader = "tribunal-ed25519-secret-key-1";
constexpr size_t kMaxKeyFileBytes = 4096;  // a key file is 159 bytes; anything far larger is not one

/// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Wipes a string that held the secret key, however the function holding it leaves.
struct Wipe {
  std::string& s;
  ~Wipe() { sodium_memzero(s.data(), s.size()); }
};

// "key file PATH: WHAT": the user's file and what is wrong with it, never this code's function names.
[[noreturn]] void key_file_error(const std::filesystem::path& path, const std::string& what) {
  throw ProtocolError("key file " + path.string() + ": " + what);
}

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

void save_keypair(const std::filesystem::path& path, const KeyPair& keys, KeyFileMode mode) {
  if (!keys.halves_agree()) key_file_error(path, "public key is not the secret key's public half");
  std::string hex = to_hex(keys.secret_key);
  const Wipe wipe_hex{hex};
  std::string text;
  const Wipe wipe_text{text};
  text.reserve(kKeyFileHeader.size() + 1 + hex.size() + 1);  // one buffer, never reallocated
  text.append(kKeyFileHeader).append("\n").append(hex).append("\n");

  // open(2) with mode 0600 so the secret is never readable by others, not even between create and chmod.
  // O_EXCL: an existing file (or a link to one) is never replaced, without a window between check and create.
  const int flags = mode == KeyFileMode::Create ? O_EXCL : O_TRUNC;
  Fd f{::open(path.c_str(), O_WRONLY | O_CREAT | flags | O_CLOEXEC, 0600)};
  if (f.fd < 0 && errno == EEXIST && mode == KeyFileMode::Create)
    key_file_error(path,
                   "exists: replacing a key invalidates every copy of its public key handed out "
                   "(--referee-key, --client-key); keygen --force replaces it");
  if (f.fd < 0) key_file_error(path, errno_text("cannot create"));
  if (::fchmod(f.fd, 0600) != 0)  // an existing file keeps its old mode under O_CREAT
    key_file_error(path, errno_text("cannot set mode 0600"));
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) key_file_error(path, errno_text("write failed"));
    done += static_cast<size_t>(n);
  }
  if (::fsync(f.fd) != 0) key_file_error(path, errno_text("fsync failed"));
  if (::close(std::exchange(f.fd, -1)) != 0) key_file_error(path, errno_text("close failed"));
}

KeyPair load_keypair(const std::filesystem::path& path) {
  ensure_sodium();
  std::string text;
  const Wipe wipe_text{text};
  {
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) key_file_error(path, errno_text("cannot open"));
    char buf[512];
    for (;;) {
      const ssize_t n = ::read(f.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) key_file_error(path, errno_text("read failed"));
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > kMaxKeyFileBytes) key_file_error(path, "too large to be a key file");
    }
    sodium_memzero(buf, sizeof buf);
  }

  const size_t eol = text.find('\n');
  if (eol == std::string::npos || std::string_view(text).substr(0, eol) != kKeyFileHeader) {
    key_file_error(path, "first line is not \"" + std::string(kKeyFileHeader) + "\"");
  }
  std::string_view hex = std::string_view(text).substr(eol + 1);
  if (!hex.empty() && hex.back() == '\n') hex.remove_suffix(1);  // the final newline is optional
  KeyPair keys;
  if (hex.size() != 2 * keys.secret_key.size()) {
    key_file_error(path, "second line has " + std::to_string(hex.size()) + " characters, expected " +
                             std::to_string(2 * keys.secret_key.size()) + " hex digits");
  }
  if (const auto bad = hex_to_bytes(hex, keys.secret_key)) {
    key_file_error(path, "second line is not hex at character " + std::to_string(*bad));
  }
  // crypto_sign_ed25519_sk_to_pk only copies the stored half, so derive the public key from the seed
  // and compare: a file whose halves disagree would sign as one key and name another.
  std::array<uint8_t, crypto_sign_SEEDBYTES> seed{};
  std::array<uint8_t, crypto_sign_SECRETKEYBYTES> derived_sk{};
  crypto_sign_ed25519_sk_to_seed(seed.data(), keys.secret_key.data());
  const int rc = crypto_sign_seed_keypair(keys.public_key.data(), derived_sk.data(), seed.data());
  const bool same =
      rc == 0 && sodium_memcmp(derived_sk.data(), keys.secret_key.data(), derived_sk.size()) == 0;
  sodium_memzero(seed.data(), seed.size());
  sodium_memzero(derived_sk.data(), derived_sk.size());
  if (!same) {
    sodium_memzero(keys.secret_key.data(), keys.secret_key.size());
    key_file_error(path, "public half does not match the secret key");
  }
  return keys;
}

}  // namespace tribunal
