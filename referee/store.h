// The referee's durable store (docs/protocol.md "Resuming", event sourcing): one SQLite database in the data
// directory, DIR/referee.sqlite, holding per dispute an append-only record of the inputs that
// changed it (referee_dispute.h's DisputeInput: the opening, then each accepted envelope, deciding
// tick and resume, in order) and, once decided, its signed verdict. A restarted referee replays each
// open dispute's record (RefereeDispute::replay) and resumes it.
//
// Write-ahead: RefereeNode commits an input before sending any message it caused, so every message
// a provider or client ever saw follows from committed inputs.
//
// With the verdict, the store keeps the dispute's rounds as they were played (its DisputeEvents), so
// that its report page is rendered from stored rows without replaying or re-executing anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/hash.h"
#include "protocol/wire.h"
#include "referee/referee_dispute.h"

struct sqlite3;

namespace tribunal {

/// A store that cannot be opened, read or written: says what failed and names the file.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One undecided dispute as recorded.
struct StoredDispute {
  Digest id{};
  std::string client;                ///< the opening client's address (IP), for per-client limits
  std::vector<DisputeInput> inputs;  ///< in order; the first is the Open
};

/// One recorded dispute as listed (the referee's /disputes page).
struct DisputeListing {
  Digest id{};
  bool decided = false;
  std::optional<std::chrono::system_clock::time_point> decided_at;  ///< when decided
  size_t inputs = 0;                                                ///< recorded inputs (0 once pruned)
};

/// Events kept per decided dispute: beyond it, the first kMaxStoredEvents − 1 and the last (the
/// verdict's) are kept, so a party that makes the referee refuse many frames cannot bloat the store.
inline constexpr size_t kMaxStoredEvents = 4096;

/// Thread-safe (one connection behind a mutex). Every write is one transaction.
class RefereeStore {
 public:
  /// Opens DIR/referee.sqlite, creating DIR and the database if missing. The store is bound to the
  /// referee key that created it: opening it with another key throws (its verdicts would be signed
  /// by two keys). Throws StoreError naming the file when it is not a database, is corrupt
  /// (integrity check), has an unknown schema version, or cannot be created.
  RefereeStore(const std::filesystem::path& dir, const PublicKey& referee);
  ~RefereeStore();
  RefereeStore(const RefereeStore&) = delete;
  RefereeStore& operator=(const RefereeStore&) = delete;

  /// The database file.
  const std::filesystem::path& file() const { return file_; }

  /// Records a new dispute and its Open input (`open.kind` must be Open). Throws StoreError if the
  /// dispute is already recorded.
  void open_dispute(const Digest& id, const DisputeInput& open, const std::string& client);
  /// Appends one input to an undecided dispute, and with it (same transaction) the verdict envelope
  /// if the input decided it, and then the dispute's `events` (its rounds as played, in order; at most
  /// kMaxStoredEvents kept; ignored without a verdict). Throws StoreError if the dispute is unknown or
  /// already decided.
  void append(const Digest& id, const DisputeInput& input, const std::vector<uint8_t>* verdict = nullptr,
              std::span<const DisputeEvent> events = {});

  /// Deletes the recorded inputs of every dispute decided before `decided_before` (system clock);
  /// their rows and verdicts stay, so verdict() still answers for them. Returns how many disputes
  /// lost their inputs. This bounds the store to the live disputes' records plus one verdict per
  /// decided dispute (SQLite reuses the freed pages). Throws StoreError.
  size_t prune(std::chrono::system_clock::time_point decided_before);
  /// Inputs recorded for a dispute (0 when unknown or pruned).
  size_t stored_inputs(const Digest& id);

  /// The signed verdict of a decided dispute; nullopt if undecided or unknown.
  std::optional<std::vector<uint8_t>> verdict(const Digest& id);
  /// A decided dispute's rounds as stored with its verdict, in order (never pruned); empty when none
  /// are stored: undecided, unknown, or decided by a referee whose store predates schema version 4.
  /// Throws StoreError on a malformed row.
  std::vector<DisputeEvent> events(const Digest& id);
  /// Whether the dispute is recorded (decided or not).
  bool contains(const Digest& id);
  /// One undecided dispute's record; nullopt if unknown or decided. Throws StoreError on a malformed row.
  std::optional<StoredDispute> load(const Digest& id);
  /// Every undecided dispute, in opening order. Throws StoreError on a malformed row.
  std::vector<StoredDispute> load_open();
  /// Every recorded input of a dispute, decided or not, in order; empty when unknown or pruned. Throws
  /// StoreError on a malformed row.
  std::vector<DisputeInput> inputs(const Digest& id);
  /// The `limit` most recently opened disputes, newest first. Throws StoreError.
  std::vector<DisputeListing> list(size_t limit);
  /// Inputs committed through this object (all disputes).
  uint64_t committed() const { return committed_; }

 private:
  struct Statement;
  [[noreturn]] void fail(const std::string& what) const;
  void exec(const char* sql);
  StoredDispute read_dispute(const Digest& id, std::string client);

  std::filesystem::path file_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  uint64_t committed_ = 0;
};

}  // namespace tribunal
