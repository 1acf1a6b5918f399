// The referee's plain HTTP routes (docs/running.md, "Monitoring" and "Dispute reports"): /healthz and
// /metrics (nodes/http_routes.h), and /disputes, /disputes/<id> from its store (nodes/dispute_pages.h).
#pragma once

#include "net/server.h"
#include "nodes/dispute_pages.h"
#include "nodes/http_routes.h"
#include "nodes/metrics.h"
#include "nodes/rate_limit.h"

namespace tribunal::nodes {

/// /healthz, /metrics (`metrics` rendered), and with a store (`pages` not null; it must outlive the
/// handler) /disputes (the most recent 200) and /disputes/<id> (the report of a decided dispute);
/// without one, the dispute pages answer 404 saying the referee keeps no store. Each request first
/// takes a token of its source's bucket (`limit`; the handlers made by one call share them).
HttpHandler referee_http_handler(const MetricsRegistry& metrics, DisputePages* pages, RateLimit limit);

}  // namespace tribunal::nodes
