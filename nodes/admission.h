// Which openings the referee takes on (docs/protocol.md, "Threat model"): the admission caps on live
// disputes, the CPU budget of each opening's source, the clients that may wait for one verdict and
// the provider endpoints it connects to. A pure component: no I/O, no sockets, no clock reads (the
// time is passed in); the referee node (nodes/referee_node.h) asks it and turns a refusal into a
// signed ErrorMessage.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "net/address_policy.h"
#include "nodes/cpu_budget.h"
#include "protocol/envelope.h"

namespace tribunal::nodes {

/// Why an opening (or a client connection to an open dispute) is refused.
enum class AdmissionRefusal {
  None,             ///< admitted
  CpuBudget,        ///< its source's openings have used their CPU budget (retry later)
  LiveDisputes,     ///< the referee holds `max_live_disputes`
  StrangerSlots,    ///< only the slots reserved for trusted clients are left, and the opener is none
  ClientDisputes,   ///< its admission group holds `max_disputes_per_client`
  WaitingClients,   ///< `max_waiting_per_address` connections from its address already wait
  ProviderAddress,  ///< a provider's endpoint is a literal address the provider policy refuses
};

/// One decision: admitted, or refused with the text the refusal's ErrorMessage carries.
struct AdmissionDecision {
  AdmissionRefusal refusal = AdmissionRefusal::None;
  std::string reason;                                 ///< empty when admitted
  std::optional<std::chrono::milliseconds> retry_in;  ///< CpuBudget only: when the source may retry
  bool admitted() const { return refusal == AdmissionRefusal::None; }
};

/// The caps (the options of `tribunal referee`; docs/running.md; RefereeNodeOptions has their
/// defaults' reasons).
struct AdmissionLimits {
  size_t max_live_disputes = 4096;         ///< live disputes at once
  size_t max_disputes_per_client = 256;    ///< live disputes per admission group
  std::vector<PublicKey> trusted_clients;  ///< keys whose openings may take the reserved slots
  size_t reserved_disputes = 1024;         ///< slots only trusted openings take (none without trusted keys)
  CpuBudgetOptions opening_cpu;            ///< CPU time of openings per admission group
  size_t max_waiting_per_address = 4;      ///< client connections from one address waiting for one verdict
};

/// The referee's admission state: its limits, the live disputes it holds per admission group, and
/// each group's CPU budget. The counts (hold, release, admit) are not synchronized: the node calls
/// them under its own lock, with its map of live disputes. The CPU budget (budget, charge) is
/// thread-safe (nodes/cpu_budget.h).
class Admission {
 public:
  using Clock = CpuBudget::Clock;

  /// Throws std::invalid_argument for a CPU budget CpuBudget refuses.
  explicit Admission(AdmissionLimits limits);

  /// Whether `opener` is one of the trusted client keys.
  bool trusted(const PublicKey& opener) const;
  /// What an opening is counted against: "client key <16 hex digits>" for a trusted key, else the
  /// client network of `address` (net/address_policy.h client_network: its /24 or /48), or `address`
  /// itself when it is not an IP address.
  std::string group(const PublicKey& opener, const std::string& address) const;

  /// Whether `group` may have an opening handled at `now`: refused (CpuBudget, with retry_in) while
  /// its balance is not positive.
  AdmissionDecision budget(const std::string& group, Clock::time_point now);
  /// Charges the CPU time an opening of `group` used, as of `now`.
  void charge(const std::string& group, std::chrono::nanoseconds used, Clock::time_point now);

  /// Whether a new dispute of `group` (opened by a trusted key or not) may be held beside those held
  /// now: below `max_live_disputes` in all; a stranger's also below it less the reserved slots
  /// counting strangers' disputes only; and below `max_disputes_per_client` for its group.
  AdmissionDecision admit(const std::string& group, bool trusted) const;
  /// Counts a dispute as held (after admit(), or a stored dispute resumed whatever the caps are now).
  void hold(const std::string& group, bool trusted);
  /// Undoes hold().
  void release(const std::string& group, bool trusted);

  /// Whether a client connection from `address` may wait for an open dispute's verdict when
  /// `waiting` connections from that address already do.
  AdmissionDecision attach(const std::string& address, size_t waiting) const;

  size_t live() const { return live_; }                  ///< disputes held
  size_t trusted_live() const { return trusted_live_; }  ///< of them, opened by trusted keys
  size_t live_of(const std::string& group) const;        ///< of them, counted against `group`

 private:
  AdmissionLimits limits_;
  CpuBudget cpu_;
  std::map<std::string, size_t> per_group_;
  size_t live_ = 0;
  size_t trusted_live_ = 0;
};

/// Why the referee does not connect to one of `urls` (a provider's ws:// or wss:// endpoint whose
/// host is a literal address `policy` refuses; a name is judged when it resolves): refused with
/// ProviderAddress, else admitted. Throws NetError for a URL that is not a WebSocket URL.
AdmissionDecision provider_endpoints(const std::vector<std::string>& urls, const AddressPolicy& policy);

}  // namespace tribunal::nodes
