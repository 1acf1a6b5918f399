// TLS (wss://, net/tls.h) over real loopback sockets: an echo through a TLS server, and the refusals a
// client must make: a certificate from a CA it does not trust, a certificate for another host, a
// plain ws:// client at a TLS port. Certificates are made at test time (tests/tls_certs.h).
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>

#include "net/client.h"
#include "net/context.h"
#include "net/error.h"
#include "net/server.h"
#include "tests/http_get.h"
#include "tests/temp_dir.h"
#include "tests/tls_certs.h"

using namespace tribunal;

namespace {

TlsFiles files(const std::filesystem::path& cert, const std::filesystem::path& key,
               const std::filesystem::path& ca) {
  TlsFiles f;
  f.cert = cert;
  f.key = key;
  f.ca = ca;
  return f;
}

struct Received {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<uint8_t>> messages;
};

// A TLS echo server on 127.0.0.1 presenting `files`.
struct TlsEcho {
  NetContext ctx{2, false};
  Server server;
  explicit TlsEcho(const TlsFiles& tls)
      : server(
            ctx,
            [](std::shared_ptr<Session> s) {
              s->set_handlers(
                  {[](Session& session, std::vector<uint8_t> m) { session.send(std::move(m)); }, {}});
            },
            [&] {
              ServerOptions o;
              o.tls = TlsContext::server(tls);
              o.http = [](const HttpRequest&, std::function<void(HttpResponse)> respond) {
                respond({200, "text/plain", "ok\n"});
              };
              return o;
            }()) {
    server.listen("127.0.0.1", 0);
    ctx.start();
  }
  std::string url(const char* scheme = "wss") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(server.port()) + "/";
  }
};

// Connects with CA file `ca`; returns the error ("" when connected, after one echo).
std::string try_connect(const std::string& url, const std::filesystem::path& ca) {
  NetContext ctx(1, false);
  ctx.start();
  ClientOptions options;
  options.tls = TlsContext::client(files({}, {}, ca));
  options.connect_timeout = std::chrono::seconds(5);
  auto got = std::make_shared<Received>();
  std::string error;
  try {
    auto s = Client(ctx, options)
                 .connect_sync(url, {[got](Session&, std::vector<uint8_t> m) {
                                       std::lock_guard lock(got->mu);
                                       got->messages.push_back(std::move(m));
                                       got->cv.notify_all();
                                     },
                                     {}});
    REQUIRE(s->send({1, 2, 3}));
    std::unique_lock lock(got->mu);
    REQUIRE(got->cv.wait_for(lock, std::chrono::seconds(10), [&] { return !got->messages.empty(); }));
    CHECK(got->messages[0] == std::vector<uint8_t>{1, 2, 3});
  } catch (const NetError& e) {
    error = e.what();
  }
  ctx.stop();
  ctx.join();
  return error;
}

}  // namespace

TEST_CASE(
    "wss: a client trusting the server's CA echoes; a wrong CA, a wrong host name and plain ws:// are "
    "refused") {
  set_net_log_sink([](std::string_view) {});
  testing::TempDir dir("tls");
  const TlsFiles good = testing::self_signed(dir.path, "referee", "IP:127.0.0.1");
  const TlsFiles other = testing::self_signed(dir.path, "stranger", "IP:127.0.0.1");
  const TlsFiles named = testing::self_signed(dir.path, "named", "DNS:example.invalid");

  TlsEcho echo(good);
  CHECK(try_connect(echo.url(), good.ca) == "");

  const std::string wrong_ca = try_connect(echo.url(), other.ca);
  CHECK(wrong_ca.find("TLS handshake") != std::string::npos);
  CHECK(wrong_ca.find("certificate verify failed") != std::string::npos);

  // Its certificate names another host than the URL's 127.0.0.1, though its CA is trusted.
  TlsEcho misnamed(named);
  const std::string wrong_host = try_connect(misnamed.url(), named.ca);
  CHECK(wrong_host.find("certificate verify failed") != std::string::npos);

  // A plain WebSocket client, or plain HTTP, at a TLS port gets no session.
  CHECK(try_connect(echo.url("ws"), good.ca) != "");
  CHECK(testing::http_get(echo.server.port(), "/healthz").status == 0);
  set_net_log_sink({});
}

TEST_CASE("TLS settings: a missing file or a key of another certificate is a clear error") {
  testing::TempDir dir("tls-files");
  const TlsFiles a = testing::self_signed(dir.path, "a", "IP:127.0.0.1");
  const TlsFiles b = testing::self_signed(dir.path, "b", "IP:127.0.0.1");
  CHECK_THROWS_WITH_AS(TlsContext::server(files(dir.path / "none.pem", a.key, {})),
                       doctest::Contains("none.pem: no such file"), NetError);
  CHECK_THROWS_WITH_AS(TlsContext::server(files(a.cert, b.key, {})),
                       doctest::Contains("b.key: key values mismatch"), NetError);
  CHECK_THROWS_WITH_AS(TlsContext::client(files({}, {}, dir.path / "none.pem")), doctest::Contains("CA file"),
                       NetError);
  CHECK_NOTHROW(TlsContext::server(a));
}
