#include "net/client.h"

#include <charconv>
#include <future>

#include "net/client_connector.h"
#include "net/context.h"
#include "net/error.h"

namespace tribunal {

WsUrl parse_ws_url(std::string_view url) {
  std::string quoted = "\"";  // appended, not `"\"" + ...`: g++ 12 warns a false -Wrestrict on that here
  quoted.append(url).push_back('"');
  WsUrl out;
  std::string_view rest;
  if (url.starts_with("ws://")) {
    rest = url.substr(5);
  } else if (url.starts_with("wss://")) {
    rest = url.substr(6);
    out.tls = true;
    out.port = 443;
  } else {
    throw NetError("URL " + quoted + ": expected ws://host:port/path or wss://host:port/path");
  }
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    out.target = std::string(rest.substr(slash));
    if (out.target.front() == '?') out.target.insert(out.target.begin(), '/');
  }
  if (authority.find('@') != std::string_view::npos)
    throw NetError("URL " + quoted + ": user information is not supported");
  std::string_view port_text;
  if (authority.starts_with("[")) {  // IPv6 literal
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw NetError("URL " + quoted + ": unterminated '[' in host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw NetError("URL " + quoted + ": unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) throw NetError("URL " + quoted + ": empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) throw NetError("URL " + quoted + ": empty port");
    }
  }
  if (out.host.empty()) throw NetError("URL " + quoted + ": empty host");
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535)
      throw NetError("URL " + quoted + ": bad port \"" + std::string(port_text) + "\"");
    out.port = static_cast<uint16_t>(value);
  }
  return out;
}

Client::Client(NetContext& ctx, ClientOptions options) : ctx_(ctx), options_(std::move(options)) {
  if (options_.tls) return;
  try {
    options_.tls = TlsContext::client({});  // wss:// URLs against the system's CAs
  } catch (const NetError& e) {
    system_tls_error_ = e.what();
  }
}

void Client::connect(std::string_view url, ConnectCallback done) {
  const WsUrl parsed = parse_ws_url(url);
  if (parsed.tls && !options_.tls)
    throw NetError("cannot connect to " + std::string(url) + ": " + system_tls_error_);
  net_detail::open_connection(ctx_, parsed, options_, std::move(done));
}

std::shared_ptr<Session> Client::connect_sync(std::string_view url, SessionHandlers handlers) {
  struct Result {
    std::shared_ptr<Session> session;
    std::string error;
  };
  // Shared: the callback outlives this frame when the wait below gives up.
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  connect(url, [promise, h = std::move(handlers)](std::shared_ptr<Session> session,
                                                  const std::string& error) mutable {
    if (session) session->set_handlers(std::move(h));  // on the strand: before the first read
    promise->set_value(Result{std::move(session), error});
  });
  // The callback always comes within connect_timeout once the context runs; a much later deadline
  // turns a context that is not running (a programming error) into an error instead of a hang.
  if (future.wait_for(options_.connect_timeout + std::chrono::seconds(5)) != std::future_status::ready)
    throw NetError("cannot connect to " + std::string(url) + ": no answer (is the NetContext running?)");
  Result result = future.get();
  if (!result.session) throw NetError("cannot connect to " + std::string(url) + ": " + result.error);
  return result.session;
}

}  // namespace tribunal
