// Key files (nodes/key_file.h; docs/running.md): mode 0600, exact format, constant-time hex parsing of
// the secret, mismatched halves refused, every error naming the path.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <string>

#include "nodes/key_file.h"
#include "protocol/envelope.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using testing::read_text;
using testing::write_text;

namespace {

const KeyPair& key_a() {
  static const KeyPair k = generate_keypair();
  return k;
}

Digest dg(uint8_t seed) {
  Digest d;
  d.fill(seed);
  return d;
}

std::string load_error(const std::filesystem::path& p) {
  try {
    load_keypair(p);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("key file: save/load round trip with mode 0600") {
  testing::TempDir dir("key-file");
  const auto path = dir.path / "node.key";
  const KeyPair k = generate_keypair();
  save_keypair(path, k);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const KeyPair back = load_keypair(path);
  CHECK(back.public_key == k.public_key);
  CHECK(back.secret_key == k.secret_key);
  const std::string text = read_text(path);
  CHECK(text.rfind("tribunal-ed25519-secret-key-1\n", 0) == 0);
  CHECK(text.size() == 30 + 128 + 1);
  // An existing world-readable file is narrowed to 0600 when overwritten.
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  save_keypair(path, key_a());
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(load_keypair(path).public_key == key_a().public_key);
  // A key loaded from a file signs envelopes that open.
  CHECK(open_envelope(seal(load_keypair(path), dg(1), 1, Children{})).sender == key_a().public_key);
}

TEST_CASE("key file: corrupted files are rejected, naming the path") {
  testing::TempDir dir("key-file-bad");
  const auto path = dir.path / "bad.key";
  save_keypair(path, generate_keypair());
  const std::string good = read_text(path);
  const size_t hex_at = good.find('\n') + 1;

  auto expect_rejected = [&](const std::string& text, const std::string& fragment) {
    write_text(path, text);
    const std::string what = load_error(path);
    CHECK(what.find(path.string()) != std::string::npos);
    CHECK(what.find(fragment) != std::string::npos);
  };
  expect_rejected("tribunal-ed25519-secret-key-2\n" + good.substr(hex_at), "first line");
  expect_rejected(good.substr(hex_at), "first line");
  expect_rejected("", "first line");
  std::string t = good;
  t[hex_at + 10] = 'g';
  expect_rejected(t, "not hex at character 10");
  t = good;
  t[hex_at + 11] = 'x';  // the second digit of a byte
  expect_rejected(t, "not hex at character 11");
  expect_rejected(good.substr(0, good.size() - 2) + "\n", "127 characters");
  expect_rejected(good.substr(0, good.size() - 1) + "00\n", "130 characters");
  expect_rejected(good + "\n", "129 characters");
  // Mismatched public half: change one hex digit of the last 32 bytes.
  t = good;
  char& c = t[hex_at + 127];
  c = (c == '0') ? '1' : '0';
  expect_rejected(t, "public half");
  // The final newline is optional; the text is otherwise exact.
  write_text(path, good.substr(0, good.size() - 1));
  CHECK_NOTHROW(load_keypair(path));
  const std::string missing = load_error(dir.path / "missing.key");
  CHECK(missing.find((dir.path / "missing.key").string()) != std::string::npos);
}

TEST_CASE("key file: KeyFileMode::Create keeps an existing file (keygen without --force)") {
  testing::TempDir dir("key-file-create");
  const auto path = dir.path / "referee.key";
  save_keypair(path, key_a(), KeyFileMode::Create);  // a new path is written
  CHECK(load_keypair(path).public_key == key_a().public_key);
  const KeyPair other = generate_keypair();
  std::string what;
  try {
    save_keypair(path, other, KeyFileMode::Create);
  } catch (const ProtocolError& e) {
    what = e.what();
  }
  CHECK(what.find(path.string() + ": exists") != std::string::npos);
  CHECK(what.find("keygen --force") != std::string::npos);
  CHECK(load_keypair(path).public_key == key_a().public_key);  // untouched
  save_keypair(path, other, KeyFileMode::Overwrite);
  CHECK(load_keypair(path).public_key == other.public_key);
}
