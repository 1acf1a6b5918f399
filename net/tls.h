// TLS for the transport (wss://): the certificate and key a server presents, the CAs a client checks
// the server's certificate against. Boost.Asio SSL over Debian's OpenSSL (docs/running.md, "TLS").
#pragma once

#include <filesystem>
#include <memory>

namespace boost::asio::ssl {
class context;
}

namespace tribunal {

/// PEM files of a node's TLS settings (`--tls-cert`, `--tls-key`, `--tls-ca`).
struct TlsFiles {
  std::filesystem::path cert;  ///< the certificate chain a server presents (leaf first)
  std::filesystem::path key;   ///< its private key (unencrypted PEM)
  /// CA certificates a client accepts a server's chain from; empty: the system's CAs (OpenSSL's
  /// default paths, Debian's ca-certificates).
  std::filesystem::path ca;
};

/// An OpenSSL context: TLS 1.2 or later. A server presents `cert` with `key`; a client verifies the
/// server's chain against `ca` and its certificate against the host of the URL (DNS name or IP
/// address, RFC 6125 / RFC 2818). Shared by every connection of a Server or Client.
class TlsContext {
 public:
  /// Throws NetError naming the file that is missing or not valid PEM, or a key not matching the certificate.
  static std::shared_ptr<TlsContext> server(const TlsFiles& files);
  /// Throws NetError naming the CA file that cannot be read.
  static std::shared_ptr<TlsContext> client(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  /// The Asio context (include <boost/asio/ssl/context.hpp> to use it).
  boost::asio::ssl::context& native();

 private:
  TlsContext();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tribunal
