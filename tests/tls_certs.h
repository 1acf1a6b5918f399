// Test certificates made at test time with the `openssl` command (Debian's openssl package): no
// private key is committed to the repository.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "net/tls.h"

namespace tribunal::testing {

/// A self-signed P-256 certificate (its own CA) for `san` (e.g. "IP:127.0.0.1" or "DNS:example.invalid"),
/// valid for a day: DIR/NAME.pem and DIR/NAME.key. Returns them as TlsFiles (ca = the certificate).
inline TlsFiles self_signed(const std::filesystem::path& dir, const std::string& name,
                            const std::string& san) {
  TlsFiles f;
  f.cert = dir / (name + ".pem");
  f.key = dir / (name + ".key");
  f.ca = f.cert;
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=" + name +
      " -addext subjectAltName=" + san + " -keyout '" + f.key.string() + "' -out '" + f.cert.string() +
      "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("openssl req failed: " + command);
  return f;
}

}  // namespace tribunal::testing
