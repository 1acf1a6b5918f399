#include "nodes/admission.h"

#include <algorithm>

#include <fmt/format.h>

#include "net/client.h"
#include "net/error.h"
#include "protocol/hash.h"

namespace tribunal::nodes {

Admission::Admission(AdmissionLimits limits) : limits_(std::move(limits)), cpu_(limits_.opening_cpu) {}

bool Admission::trusted(const PublicKey& opener) const {
  return std::find(limits_.trusted_clients.begin(), limits_.trusted_clients.end(), opener) !=
         limits_.trusted_clients.end();
}

std::string Admission::group(const PublicKey& opener, const std::string& address) const {
  if (trusted(opener)) return "client key " + to_hex(Digest(opener)).substr(0, 16);
  try {
    return client_network(address);
  } catch (const NetError&) {
    return address;  // not an IP address (never for a TCP peer): counted by itself
  }
}

AdmissionDecision Admission::budget(const std::string& group, Clock::time_point now) {
  const auto wait = cpu_.wait(group, now);
  if (!wait) return {};
  const CpuBudgetOptions& b = cpu_.options();
  return {AdmissionRefusal::CpuBudget,
          fmt::format("the openings from {} have used their CPU budget at this referee ({:.3g} CPU-s at "
                      "once, refilled at {:.3g} CPU-s per second); retry in {:.3f} s",
                      group, std::chrono::duration<double>(b.burst).count(), b.refill_per_second,
                      std::chrono::duration<double>(*wait).count()),
          wait};
}

void Admission::charge(const std::string& group, std::chrono::nanoseconds used, Clock::time_point now) {
  cpu_.charge(group, used, now);
}

// Fair admission: a global cap; slots that only trusted clients' openings may take, so strangers
// cannot fill the referee; and a cap per client network (or trusted key).
AdmissionDecision Admission::admit(const std::string& group, bool trusted) const {
  if (live_ >= limits_.max_live_disputes)
    return {AdmissionRefusal::LiveDisputes,
            fmt::format("the referee holds {} live disputes, its limit; try again later", live_),
            std::nullopt};
  const size_t reserved = limits_.trusted_clients.empty() ? 0 : limits_.reserved_disputes;
  const size_t strangers = live_ - trusted_live_;
  if (!trusted && strangers + reserved >= limits_.max_live_disputes)
    return {AdmissionRefusal::StrangerSlots,
            fmt::format("the referee holds {} live disputes of clients it does not know, its limit for them "
                        "({} more are kept for its trusted clients); try again later",
                        strangers, reserved),
            std::nullopt};
  const size_t mine = live_of(group);
  if (mine >= limits_.max_disputes_per_client)
    return {AdmissionRefusal::ClientDisputes,
            fmt::format("{} has {} live disputes, the limit per client", group, mine), std::nullopt};
  return {};
}

void Admission::hold(const std::string& group, bool trusted) {
  ++per_group_[group];
  ++live_;
  if (trusted) ++trusted_live_;
}

void Admission::release(const std::string& group, bool trusted) {
  if (const auto it = per_group_.find(group); it != per_group_.end() && --it->second == 0)
    per_group_.erase(it);
  --live_;
  if (trusted) --trusted_live_;
}

size_t Admission::live_of(const std::string& group) const {
  const auto it = per_group_.find(group);
  return it == per_group_.end() ? 0 : it->second;
}

// Counted per address, so strangers who hold the opening cannot fill the waiting list and lock the
// real client out.
AdmissionDecision Admission::attach(const std::string& address, size_t waiting) const {
  if (waiting < limits_.max_waiting_per_address) return {};
  return {AdmissionRefusal::WaitingClients,
          fmt::format("{} connections from {} already wait for this dispute's verdict",
                      limits_.max_waiting_per_address, address),
          std::nullopt};
}

AdmissionDecision provider_endpoints(const std::vector<std::string>& urls, const AddressPolicy& policy) {
  for (const std::string& url : urls) {
    const WsUrl u = parse_ws_url(url);  // throws NetError
    // A literal address is judged now; a name when it resolves (net/address_policy.h).
    std::string refused;
    try {
      refused = policy.refusal(u.host);
    } catch (const NetError&) {
    }
    if (!refused.empty())
      return {AdmissionRefusal::ProviderAddress,
              "a provider's endpoint " + url + " is a " + refused +
                  " address, which this referee does not connect to (--allow-network)",
              std::nullopt};
  }
  return {};
}

}  // namespace tribunal::nodes
