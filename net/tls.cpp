#include "net/tls.h"

#include <openssl/err.h>

#include <boost/asio/ssl/context.hpp>
#include <string>

#include "net/error.h"

namespace tribunal {

namespace ssl = boost::asio::ssl;

struct TlsContext::Impl {
  explicit Impl(ssl::context::method method) : context(method) {
    context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                        ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  }
  ssl::context context;
};

namespace {

// "what PATH: OpenSSL's reason", for a file the operator named.
[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path,
                       const boost::system::error_code& ec) {
  std::string reason = ec.message();
  if (!std::filesystem::exists(path)) reason = "no such file";
  throw NetError("TLS: " + what + " " + path.string() + ": " + reason);
}

}  // namespace

TlsContext::TlsContext() = default;
TlsContext::~TlsContext() = default;

ssl::context& TlsContext::native() {
  return impl_->context;
}

std::shared_ptr<TlsContext> TlsContext::server(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty())
    throw NetError("TLS: a server needs a certificate and its key");
  std::shared_ptr<TlsContext> t(new TlsContext());
  t->impl_ = std::make_unique<Impl>(ssl::context::tls_server);
  boost::system::error_code ec;
  t->impl_->context.use_certificate_chain_file(files.cert.string(), ec);
  if (ec) fail("certificate", files.cert, ec);
  t->impl_->context.use_private_key_file(files.key.string(), ssl::context::pem, ec);
  if (ec) fail("private key", files.key, ec);
  if (SSL_CTX_check_private_key(t->impl_->context.native_handle()) != 1)
    throw NetError("TLS: private key " + files.key.string() + " does not match certificate " +
                   files.cert.string());
  return t;
}

std::shared_ptr<TlsContext> TlsContext::client(const TlsFiles& files) {
  std::shared_ptr<TlsContext> t(new TlsContext());
  t->impl_ = std::make_unique<Impl>(ssl::context::tls_client);
  boost::system::error_code ec;
  if (files.ca.empty()) {
    t->impl_->context.set_default_verify_paths(ec);
    if (ec) throw NetError("TLS: the system's CA certificates: " + ec.message());
  } else {
    t->impl_->context.load_verify_file(files.ca.string(), ec);
    if (ec) fail("CA file", files.ca, ec);
  }
  t->impl_->context.set_verify_mode(ssl::verify_peer);
  return t;
}

}  // namespace tribunal
