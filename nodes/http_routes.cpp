#include "nodes/http_routes.h"

#include <time.h>

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "nodes/process_metrics.h"

namespace tribunal::nodes {

HttpHandler node_http_handler(const MetricsRegistry& metrics, ExtraRoutes extra, RateLimit limit) {
  auto limiter = std::make_shared<RateLimiter>(limit);
  return [&metrics, extra = std::move(extra), limiter](const HttpRequest& request,
                                                       std::function<void(HttpResponse)> respond) {
    if (const auto wait = limiter->take(source_address(request.remote))) {
      const auto seconds = std::chrono::ceil<std::chrono::seconds>(*wait).count();
      return respond({429,
                      "text/plain; charset=utf-8",
                      fmt::format("too many requests from your address; retry in {} s\n", seconds),
                      {{"Retry-After", std::to_string(seconds)}}});
    }
    if (request.method != "GET" && request.method != "HEAD")
      return respond({405, "text/plain; charset=utf-8", "only GET\n"});
    const std::string path = request.target.substr(0, request.target.find('?'));
    if (path == "/healthz") return respond({200, "text/plain; charset=utf-8", "ok\n"});
    if (path == "/metrics") return respond({200, kPrometheusContentType, metrics.render()});
    HttpRequest routed = request;
    routed.target = path;
    if (extra && extra(routed, respond)) return;
    respond({404, "text/plain; charset=utf-8", "not found: " + path + "\n"});
  };
}

void add_server_metrics(MetricsRegistry& metrics, const Server& server) {
  metrics.gauge("tribunal_connections_open", "Connections admitted and not yet ended (WebSocket and HTTP).",
                [&server] { return static_cast<double>(server.connection_count()); });
  metrics.counter_fn(
      "tribunal_connections_refused_total",
      "Connections refused by the connection limits (HTTP 503, HTTP 429, or closed unanswered).",
      [&server] { return static_cast<double>(server.refused_count()); });
  metrics.counter_fn("process_cpu_seconds_total", "Total user and system CPU time of the process in seconds.",
                     [] {
                       timespec ts{};
                       clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
                       return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
                     });
  add_process_metrics(metrics);
}

std::unique_ptr<Server> listen_http(NetContext& ctx, HttpHandler handler, const std::string& host,
                                    uint16_t port) {
  ServerOptions options;
  options.http = std::move(handler);
  options.websocket = false;
  auto server = std::make_unique<Server>(
      ctx, [](std::shared_ptr<Session> s) { s->close(CloseCode::PolicyViolation); }, std::move(options));
  server->listen(host, port);
  return server;
}

}  // namespace tribunal::nodes
