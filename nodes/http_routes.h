// The plain HTTP side of a node, on its WebSocket port or on a separate metrics address: /healthz,
// /metrics (Prometheus text format) and what a node adds (the referee's /disputes). docs/running.md,
// "Monitoring".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "net/context.h"
#include "net/server.h"
#include "nodes/metrics.h"
#include "nodes/rate_limit.h"

namespace tribunal::nodes {

/// Routes of a node beyond /healthz and /metrics: returns false when it does not serve the target
/// (then 404), else answers through `respond` (once).
using ExtraRoutes = std::function<bool(const HttpRequest&, const std::function<void(HttpResponse)>& respond)>;

/// The handler every node serves: GET /healthz → 200 "ok", GET /metrics → `metrics` rendered, then
/// `extra`; any other method → 405, any other target → 404. The query string is ignored. Every
/// request first takes a token of its source address's bucket (`limit`; nodes/rate_limit.h): beyond
/// it, 429 with Retry-After (whole seconds) and nothing else is done. The handlers made by one call
/// share their buckets; a node's WebSocket port and its --metrics address each get their own.
HttpHandler node_http_handler(const MetricsRegistry& metrics, ExtraRoutes extra = {}, RateLimit limit = {});

/// Registers the series of a node's server: connections open now, refused by the limits since start
/// (net/server.h), the process's CPU seconds (`process_cpu_seconds_total`), and the other process
/// series and tribunal_build_info (nodes/process_metrics.h).
void add_server_metrics(MetricsRegistry& metrics, const Server& server);

/// A separate HTTP-only address (`--metrics HOST:PORT`): a Server that answers `handler` and refuses
/// WebSocket upgrades (404). Returns it listening; its bound port is server->port(). Throws NetError.
std::unique_ptr<Server> listen_http(NetContext& ctx, HttpHandler handler, const std::string& host,
                                    uint16_t port);

}  // namespace tribunal::nodes
