// Key files: a node's Ed25519 key pair on disk (docs/running.md, "Run a dispute network"). Outside
// protocol/, which does no file I/O.
//
// Format: two lines, "tribunal-ed25519-secret-key-1" and the 64-byte secret key in lowercase hex (the
// public key is its second half); the final newline is optional when reading.
#pragma once

#include <filesystem>

#include "protocol/envelope.h"

namespace tribunal {

/// Writes `keys` to `path` with mode 0600 (an existing file is narrowed to 0600 too), then fsyncs it.
/// Throws ProtocolError naming the path if the halves of `keys` disagree or any write fails.
void save_keypair(const std::filesystem::path& path, const KeyPair& keys);

/// Reads a key file, parsing the secret key in constant time (hex_to_bytes) and checking that its
/// public half is the one its seed derives. Throws ProtocolError naming the path and what is wrong
/// (first line, length or hex digit of the second, mismatched halves, I/O).
KeyPair load_keypair(const std::filesystem::path& path);

}  // namespace tribunal
