#include "nodes/dispute_pages.h"

#include <algorithm>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "referee/report.h"

namespace tribunal::nodes {

namespace {

constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kHtml = "text/html; charset=utf-8";

// What the page of a dispute decided before the store kept rounds (schema version 4) says instead.
constexpr const char* kNoStoredRounds =
    "This dispute was decided by a referee whose store did not keep its rounds (before schema version 4). "
    "Pages are rendered from the store only, never by replaying or re-executing a dispute, so its rounds "
    "are not shown; `tribunal report VERDICT --store DIR` replays its record offline while it is kept.";

}  // namespace

DisputePages::DisputePages(RefereeStore& store, PublicKey referee, Logger log, MetricsRegistry& metrics,
                           PageLimits limits, DataRegistry models)
    : store_(store),
      referee_(referee),
      log_(std::move(log)),
      limits_(limits),
      models_(std::move(models)),
      rendered_(metrics.counter(
          "tribunal_referee_pages_rendered_total",
          "Dispute pages rendered from the store (a page kept rendered is not counted again).")),
      skipped_(metrics.counter("tribunal_referee_pages_skipped_total",
                               "Dispute page requests whose client had gone before the page was rendered.")) {
}

DisputePages::~DisputePages() {
  thread_.stop();  // requests not started are dropped (their connections close unanswered)
  thread_.join();
}

std::shared_ptr<const std::string> DisputePages::cached(const Digest& id) {
  std::lock_guard lock(mu_);
  const auto it = std::find_if(cache_.begin(), cache_.end(), [&](const Cached& c) { return c.id == id; });
  if (it == cache_.end()) return nullptr;
  cache_.splice(cache_.begin(), cache_, it);
  return cache_.front().html;
}

void DisputePages::keep(const Digest& id, std::shared_ptr<const std::string> html) {
  if (limits_.cached_pages == 0 || html->size() > limits_.max_cached_bytes) return;
  std::lock_guard lock(mu_);
  std::erase_if(cache_, [&](const Cached& c) { return c.id == id; });
  cache_.push_front({id, std::move(html)});
  while (cache_.size() > limits_.cached_pages) cache_.pop_back();
}

// On the page thread: the most recent disputes with each decided one's outcome, read from its verdict.
HttpResponse DisputePages::listing(bool json) {
  const std::vector<DisputeListing> disputes = store_.list(200);
  std::vector<std::optional<DisputeOutcome>> outcomes(disputes.size());
  std::vector<std::optional<DisputeProgress>> progress(disputes.size());
  for (size_t i = 0; i < disputes.size(); ++i) {
    if (!disputes[i].decided) {
      if (json && live_progress) progress[i] = live_progress(disputes[i].id);
      continue;
    }
    if (auto verdict = store_.verdict(disputes[i].id)) outcomes[i] = dispute_outcome(*verdict);
  }
  if (json) return {200, "application/json", dispute_list_json(disputes, outcomes, progress)};
  return {200, kHtml, dispute_list_html(disputes, outcomes)};
}

// On the page thread. A decided dispute's page depends only on what the store held when it was
// decided (its verdict and rounds; its record until pruned), so once rendered it is kept.
HttpResponse DisputePages::page(const Digest& id, const HttpRequest& request) {
  if (auto html = cached(id)) return {200, kHtml, *html};
  auto verdict = store_.verdict(id);
  if (!verdict)
    return {404, kText, store_.contains(id) ? "the dispute is not decided yet\n" : "no such dispute\n"};
  ReportInput in;
  in.verdict = std::move(*verdict);
  in.referee_key = referee_;
  in.models = models_;
  in.events = store_.events(id);
  if (in.events.empty()) in.no_rounds = kNoStoredRounds;
  // The record (while kept) is the largest read: skipped when nobody waits for the page.
  if (request.peer_gone->load()) {
    skipped_.inc();
    return {503, kText, "client gone\n"};
  }
  in.record = store_.inputs(id);
  if (const auto listing = store_.listing(id)) in.decided_at = listing->decided_at;
  auto html = std::make_shared<const std::string>(dispute_report_html(in));
  rendered_.inc();
  keep(id, html);
  return {200, kHtml, *html};
}

bool DisputePages::route(const HttpRequest& r, const std::function<void(HttpResponse)>& respond) {
  constexpr std::string_view kPrefix = "/disputes";
  constexpr std::string_view kJson = "/disputes.json";
  if (r.target != kPrefix && r.target != kJson && r.target.rfind("/disputes/", 0) != 0) return false;
  const bool json = r.target == kJson;
  const bool list = r.target == kPrefix || json;
  Digest id{};
  if (!list) {
    // Exactly 64 hex digits: nothing else from the peer reaches the store.
    const std::string id_hex = r.target.substr(kPrefix.size() + 1);
    if (id_hex.size() != 64 || id_hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      respond({404, kText, "a dispute page is /disputes/<64 lowercase hex digits>\n"});
      return true;
    }
    id = digest_from_hex(id_hex);
  }
  if (queued_.fetch_add(1) >= limits_.max_queued) {
    queued_.fetch_sub(1);
    respond({503,
             kText,
             fmt::format("{} dispute pages are being rendered; retry in a second\n", limits_.max_queued),
             {{"Retry-After", "1"}}});
    return true;
  }
  boost::asio::post(thread_, [this, r, respond, id, list, json] {
    HttpResponse answer;
    try {
      if (r.peer_gone->load()) {
        skipped_.inc();
        answer = {503, kText, "client gone\n"};
      } else {
        answer = list ? listing(json) : page(id, r);
      }
    } catch (const std::exception& e) {
      log_->error(fmt::format("referee: a dispute page failed: {}", e.what()));
      answer = {500, kText, "the page failed (details in the referee's log)\n"};
    }
    queued_.fetch_sub(1);
    respond(std::move(answer));
  });
  return true;
}

}  // namespace tribunal::nodes
