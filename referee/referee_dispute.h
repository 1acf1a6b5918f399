// One dispute as the referee plays it: checks the opening (two claims, signed by two different
// providers, for the job the referee re-derives), drives the Game, checks every envelope's sender,
// context and sequence before the game sees it, re-executes the located node with RepOps, and signs
// the verdict. Transport-agnostic: it takes envelopes and returns envelopes (referee/server.h moves
// them over WebSocket).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/dispute.h"
#include "engine/job.h"
#include "protocol/game.h"
#include "protocol/wire.h"

namespace tribunal {

/// Limits on what an opening may ask the referee to hold.
inline constexpr uint64_t kMaxDisputeSamples = uint64_t{1} << 26;
inline constexpr uint64_t kMaxDisputeFeatures = uint64_t{1} << 20;
inline constexpr uint64_t kMaxDisputeCheckpoints = uint64_t{1} << 20;

struct RefereeOptions {
  uint64_t answer_timeout_ms = 10000;
  uint64_t recompute_timeout_ms = 300000;
};

/// A structured event for logs and live displays: one per question round, one per narrowing (level
/// hand-off) and one for the verdict.
struct DisputeEvent {
  Phase phase;
  uint32_t round = 0;
  std::string text;  ///< one line, e.g. "level 1: checkpoints [2, 3) differ"
};

class RefereeDispute {
 public:
  /// `open` is the client's DisputeOpen envelope. Throws ProtocolError/EngineError if the claims are
  /// not two valid signed Claims by two different keys for the job the opening describes.
  RefereeDispute(const KeyPair& referee_key, const Envelope& open, RefereeOptions options = {});

  /// An envelope to deliver to party 0 or 1.
  struct Outgoing {
    int party;
    std::vector<uint8_t> envelope;
  };

  /// The first questions; also the DisputeOpen forwarded to both providers, so they know the job.
  std::vector<Outgoing> start(uint64_t now_ms);

  /// An envelope received from a party's connection. Envelopes not signed by that party's claim key,
  /// for another dispute, or with a stale sequence number are refused without effect (returned in
  /// `refused`).
  std::vector<Outgoing> on_envelope(int party, const Envelope& env, uint64_t now_ms, std::string* refused = nullptr);

  std::vector<Outgoing> on_tick(uint64_t now_ms);

  bool done() const { return verdict_envelope_.has_value(); }
  const Digest& dispute_id() const { return dispute_id_; }
  const Digest& job_id() const { return job_id_; }
  /// The signed verdict envelope, once done.
  const std::vector<uint8_t>& verdict_envelope() const { return *verdict_envelope_; }
  const Verdict& verdict() const { return verdict_; }
  const std::vector<std::string>& providers() const { return providers_; }
  const Game& game() const { return *game_; }
  const JobOracle& oracle() const { return *oracle_; }

  /// Receives every event (DisputeEvent).
  std::function<void(const DisputeEvent&)> on_event;

 private:
  std::vector<Outgoing> handle(std::vector<Action> actions, uint64_t now_ms);
  std::vector<uint8_t> seal_next(const Body& body);
  void emit(std::string text);

  KeyPair key_;
  Digest job_id_{}, dispute_id_{};
  std::vector<uint8_t> open_bytes_;
  std::vector<std::vector<uint8_t>> claim_envelopes_;
  std::array<PublicKey, 2> party_keys_{};
  std::array<uint64_t, 2> last_sequence_{};
  std::vector<std::string> providers_;
  JobSpec job_;
  std::unique_ptr<JobOracle> oracle_;
  std::unique_ptr<Game> game_;
  uint64_t sequence_ = 0;
  Verdict verdict_;
  std::optional<std::vector<uint8_t>> verdict_envelope_;
  Phase last_phase_ = Phase::Checkpoints;
  uint32_t last_logged_round_ = 0;
};

/// Checks a verdict envelope offline: decodes it, verifies the referee's signature (and, if given,
/// that the signer is `referee`), and that the claims inside are validly signed Claims whose job and
/// dispute ids match the verdict. Throws ProtocolError saying what is wrong; returns the verdict.
Verdict verify_verdict(std::span<const uint8_t> envelope, const PublicKey* referee = nullptr);

}  // namespace tribunal
