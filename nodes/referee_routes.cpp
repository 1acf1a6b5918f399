#include "nodes/referee_routes.h"

namespace tribunal::nodes {

HttpHandler referee_http_handler(const MetricsRegistry& metrics, DisputePages* pages, RateLimit limit) {
  return node_http_handler(
      metrics,
      [pages](const HttpRequest& r, const std::function<void(HttpResponse)>& respond) {
        if (pages) return pages->route(r, respond);
        if (r.target != "/disputes" && r.target.rfind("/disputes/", 0) != 0) return false;
        respond({404, "text/plain; charset=utf-8",
                 "this referee keeps no store (--data), so no dispute pages\n"});
        return true;
      },
      limit);
}

}  // namespace tribunal::nodes
