#include "net/http_get.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "net/client.h"
#include "net/error.h"

namespace tribunal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Writes the request and reads the answer on `stream`, each under what is left of `deadline`.
template <class Stream>
HttpGetReply exchange(Stream& stream, beast::tcp_stream& tcp_layer, const WsUrl& u, const std::string& target,
                      size_t max_body, std::chrono::steady_clock::time_point deadline) {
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, u.host);
  request.set(http::field::user_agent, "tribunal");
  request.set(http::field::connection, "close");
  tcp_layer.expires_at(deadline);
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  tcp_layer.expires_at(deadline);
  http::read(stream, buffer, parser);
  HttpGetReply reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.body = std::move(parser.get().body());
  return reply;
}

}  // namespace

HttpGetReply http_get(const std::string& url, const std::string& target, const HttpGetOptions& options) {
  const WsUrl u = parse_ws_url(url);
  const std::string where = std::string(u.tls ? "https://" : "http://") +
                            (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                            std::to_string(u.port) + target;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  asio::io_context io;
  try {
    tcp::resolver resolver(io);
    beast::tcp_stream tcp_stream(io);
    tcp_stream.expires_at(deadline);
    tcp_stream.connect(resolver.resolve(u.host, std::to_string(u.port)));
    if (!u.tls) return exchange(tcp_stream, tcp_stream, u, target, options.max_body_bytes, deadline);
    const std::shared_ptr<TlsContext> tls = options.tls ? options.tls : TlsContext::client({});
    beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp_stream), tls->native());
    // As the WebSocket client (net/client_connector.cpp): SNI for names, the host name checked.
    boost::system::error_code ec;
    const bool is_ip = (asio::ip::make_address(u.host, ec), !ec);
    if (!is_ip) SSL_set_tlsext_host_name(stream.native_handle(), u.host.c_str());
    stream.set_verify_mode(asio::ssl::verify_peer);
    stream.set_verify_callback(asio::ssl::host_name_verification(u.host));
    beast::get_lowest_layer(stream).expires_at(deadline);
    stream.handshake(asio::ssl::stream_base::client);
    return exchange(stream, beast::get_lowest_layer(stream), u, target, options.max_body_bytes, deadline);
  } catch (const boost::system::system_error& e) {
    throw NetError(where + ": " + e.code().message());
  }
}

}  // namespace tribunal
