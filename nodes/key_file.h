// Key files: a node's Ed25519 key pair on disk (docs/running.md, "Run a dispute network"). Outside
// protocol/, which does no file I/O.
//
// Format: two lines, "tribunal-ed25519-secret-key-1" and the 64-byte secret key in lowercase hex (the
// public key is its second half); the final newline is optional when reading.
#pragma once

#include <filesystem>

#include "protocol/envelope.h"

namespace tribunal {

/// Whether save_keypair may replace an existing file.
enum class KeyFileMode {
  Overwrite,  ///< replace it (its mode narrowed to 0600 too)
  Create,     ///< refuse an existing path: a replaced key invalidates every copy of its public key handed out
};

/// Writes `keys` to `path` with mode 0600, then fsyncs it. Throws ProtocolError("key file PATH: …") if the
/// halves of `keys` disagree, any write fails, or (KeyFileMode::Create) the path exists.
void save_keypair(const std::filesystem::path& path, const KeyPair& keys,
                  KeyFileMode mode = KeyFileMode::Overwrite);

/// Reads a key file, parsing the secret key in constant time (hex_to_bytes) and checking that its
/// public half is the one its seed derives. Throws ProtocolError("key file PATH: …"): what is wrong
/// (first line, length or hex digit of the second, mismatched halves, I/O).
KeyPair load_keypair(const std::filesystem::path& path);

}  // namespace tribunal
