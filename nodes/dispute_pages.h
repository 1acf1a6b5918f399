// The referee's dispute pages (docs/running.md, "Dispute reports"): GET /disputes (also as JSON at
// /disputes.json) and /disputes/<id>, rendered from what the store holds — the verdict, the rounds stored
// with it and the recorded inputs while they are kept — never by re-executing the dispute (the record
// is replayed for its timeline, the located node's re-execution skipped). Pages are
// rendered on one thread of their own behind a bounded queue, so they never take the workers that
// play live disputes; a page whose client has gone is not rendered; the last pages rendered are
// kept, so repeated requests for one page cost one rendering.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "net/server.h"
#include "nodes/log.h"
#include "nodes/metrics.h"
#include "referee/report.h"
#include "referee/store.h"

namespace tribunal::nodes {

/// How much page work the referee takes on.
struct PageLimits {
  size_t max_queued = 16;             ///< page requests waiting or rendering; beyond, 503 with Retry-After
  size_t cached_pages = 16;           ///< decided disputes' pages kept rendered (least recently used out)
  size_t max_cached_bytes = 4 << 20;  ///< a larger page is rendered each time, not kept
};

/// Serves /disputes and /disputes/<64 lowercase hex digits> from `store`. Thread-safe.
class DisputePages {
 public:
  /// `store` must outlive this object. `referee` is the key the pages check verdicts against.
  /// Registers tribunal_referee_pages_rendered_total and tribunal_referee_pages_skipped_total in `metrics`.
  /// `models`: the referee's registered model files, from which an imported model's located step is drawn.
  DisputePages(RefereeStore& store, PublicKey referee, Logger log, MetricsRegistry& metrics,
               PageLimits limits = {}, DataRegistry models = {});
  /// Drops the requests not yet started and waits for the one rendering.
  ~DisputePages();
  DisputePages(const DisputePages&) = delete;
  DisputePages& operator=(const DisputePages&) = delete;

  /// An ExtraRoutes (nodes/http_routes.h): false when `request.target` (its path) is not a dispute page
  /// (/disputes, /disputes.json, /disputes/<id>).
  bool route(const HttpRequest& request, const std::function<void(HttpResponse)>& respond);

  /// Set before the first request: the live state of an undecided dispute, for /disputes.json's
  /// `progress` (referee/report.h dispute_list_json); called on the pages' thread. Unset: none shown.
  std::function<std::optional<DisputeProgress>(const Digest&)> live_progress;

 private:
  struct Cached {
    Digest id;
    std::shared_ptr<const std::string> html;
  };
  HttpResponse page(const Digest& id, const HttpRequest& request);
  HttpResponse listing(bool json);
  std::shared_ptr<const std::string> cached(const Digest& id);
  void keep(const Digest& id, std::shared_ptr<const std::string> html);

  RefereeStore& store_;
  PublicKey referee_;
  Logger log_;
  PageLimits limits_;
  DataRegistry models_;
  Counter& rendered_;
  Counter& skipped_;
  std::atomic<size_t> queued_{0};
  std::mutex mu_;
  std::list<Cached> cache_;  // most recently used first
  boost::asio::thread_pool thread_{1};
};

}  // namespace tribunal::nodes
