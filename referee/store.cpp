#include "referee/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace tribunal {
namespace {

constexpr int kSchemaVersion = 5;

// The schema. `inputs` is append-only while a dispute is undecided: rows are inserted, never updated;
// `n` gives the order of the inputs of one dispute. A dispute is decided once its `verdict` is set,
// at `decided_at` (Unix seconds); prune() deletes a decided dispute's inputs after the retention
// period and keeps its row and verdict. `events` holds each dispute's rounds as it plays them
// (DisputeEvent), written with the inputs that made them and kept with the verdict: the dispute's page
// is rendered from them and a resumed dispute continues them, never by replaying the record
// (docs/running.md, "Dispute reports"). `events_kept` is 0 for a dispute whose events before some point
// are missing: it was undecided, or decided without rounds, when an older store was upgraded.
// (Version 1 had no `decided_at`; versions 1 and 2 kept the referee's deadlines per dispute, which the
// job's [dispute] terms replace; versions 1 to 3 had no `events`; version 4 wrote them only with the
// verdict and had no `events_kept`. Opening such a store upgrades it: the disputes it decided without
// rounds keep none, and the undecided ones get theirs back when they are resumed, by replay.)
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS disputes (
  id BLOB PRIMARY KEY CHECK (length(id) = 32),
  client TEXT NOT NULL,
  verdict BLOB,
  decided_at INTEGER,
  events_kept INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS inputs (
  n INTEGER PRIMARY KEY,
  dispute BLOB NOT NULL REFERENCES disputes (id),
  kind INTEGER NOT NULL,
  party INTEGER NOT NULL,
  envelope BLOB NOT NULL,
  now_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS inputs_by_dispute ON inputs (dispute, n);
)sql";

// Version 4's addition: part of a new store's schema, and the upgrade of a store of versions 1 to 3.
constexpr const char* kEventsTable = R"sql(
CREATE TABLE events (
  dispute BLOB NOT NULL REFERENCES disputes (id),
  n INTEGER NOT NULL,
  phase INTEGER NOT NULL,
  round INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (dispute, n)
);
)sql";

int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

// A prepared statement, finalized at scope exit.
struct RefereeStore::Statement {
  const RefereeStore& store;
  sqlite3_stmt* stmt = nullptr;
  Statement(const RefereeStore& s, const char* sql) : store(s) {
    if (sqlite3_prepare_v2(s.db_, sql, -1, &stmt, nullptr) != SQLITE_OK)
      s.fail(std::string("cannot run '") + sql + "'");
  }
  ~Statement() { sqlite3_finalize(stmt); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int i, std::span<const uint8_t> bytes) {
    const int rc = bytes.empty() ? sqlite3_bind_zeroblob(stmt, i, 0)
                                 : sqlite3_bind_blob(stmt, i, bytes.data(), static_cast<int>(bytes.size()),
                                                     SQLITE_TRANSIENT);
    if (rc != SQLITE_OK) store.fail("cannot bind a value");
  }
  void bind(int i, const Digest& d) { bind(i, std::span<const uint8_t>(d.data(), d.size())); }
  void bind(int i, int64_t v) {
    if (sqlite3_bind_int64(stmt, i, v) != SQLITE_OK) store.fail("cannot bind a value");
  }
  void bind(int i, const std::string& s) {
    if (sqlite3_bind_text(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT) != SQLITE_OK)
      store.fail("cannot bind a value");
  }
  /// True while there is a row; throws on error.
  bool step() {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    store.fail("statement failed");
  }
  std::vector<uint8_t> blob(int col) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt, col));
    const int n = sqlite3_column_bytes(stmt, col);
    return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>{};
  }
  bool is_null(int col) const { return sqlite3_column_type(stmt, col) == SQLITE_NULL; }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt, col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt, col))) : std::string{};
  }
};

void RefereeStore::fail(const std::string& what) const {
  throw StoreError(fmt::format("referee store {}: {}: {}", file_.string(), what,
                               db_ ? sqlite3_errmsg(db_) : "no database"));
}

void RefereeStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw StoreError(fmt::format("referee store {}: {}", file_.string(), msg));
  }
}

RefereeStore::RefereeStore(const std::filesystem::path& dir, const PublicKey& referee)
    : file_(dir / "referee.sqlite") {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw StoreError(
        fmt::format("referee store {}: cannot create the directory: {}", dir.string(), ec.message()));
  if (sqlite3_open_v2(file_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(fmt::format("referee store {}: cannot open: {}", file_.string(), msg));
  }
  try {
    sqlite3_busy_timeout(db_, 5000);
    // WAL with synchronous=NORMAL survives SIGKILL without losing a committed input: a commit
    // appends its frames to the -wal file with write(2) before sqlite3_step returns, so they are in
    // the kernel's page cache, which outlives the process; the next open replays the WAL (frames are
    // checksummed, a torn tail is ignored). NORMAL skips only the fsync per commit (it syncs at
    // checkpoints), so what an OS crash or power loss can take is the last commits — never the
    // database's consistency. FULL would add an fsync per input for that case.
    {
      Statement s(*this, "PRAGMA journal_mode=WAL");
      if (!s.step() || s.text(0) != "wal") fail("cannot switch to WAL mode");
    }
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");
    {
      Statement s(*this, "PRAGMA quick_check(4)");
      std::string problems;
      while (s.step())
        if (s.text(0) != "ok") problems += (problems.empty() ? "" : "; ") + s.text(0);
      if (!problems.empty())
        throw StoreError(
            fmt::format("referee store {}: the database is corrupt: {}", file_.string(), problems));
    }
    int version = 0;
    {
      Statement s(*this, "PRAGMA user_version");
      if (s.step()) version = static_cast<int>(s.integer(0));
    }
    if (version == 0) {
      {
        Statement s(*this, "SELECT count(*) FROM sqlite_schema");
        if (s.step() && s.integer(0) != 0)
          throw StoreError(fmt::format(
              "referee store {}: not a tribunal referee store (it holds other tables)", file_.string()));
      }
      exec("BEGIN IMMEDIATE");
      exec(kSchema);
      exec(kEventsTable);
      {
        Statement s(*this, "INSERT INTO meta (key, value) VALUES ('referee_key', ?1)");
        s.bind(1, std::span<const uint8_t>(referee.data(), referee.size()));
        s.step();
      }
      exec(fmt::format("PRAGMA user_version={}", kSchemaVersion).c_str());
      exec("COMMIT");
    } else if (version >= 1 && version <= 4) {
      exec("BEGIN IMMEDIATE");
      if (version == 1) {
        // Version 1's decided disputes get the time of this upgrade as their decision time.
        exec("ALTER TABLE disputes ADD COLUMN decided_at INTEGER");
        exec(fmt::format("UPDATE disputes SET decided_at = {} WHERE verdict IS NOT NULL",
                         unix_seconds(std::chrono::system_clock::now()))
                 .c_str());
      }
      if (version <= 2) {
        exec("ALTER TABLE disputes DROP COLUMN answer_timeout_ms");
        exec("ALTER TABLE disputes DROP COLUMN recompute_timeout_ms");
      }
      if (version <= 3) exec(kEventsTable);
      // Version 5: events as they happen. Those of a dispute without rows were never written.
      exec("ALTER TABLE disputes ADD COLUMN events_kept INTEGER NOT NULL DEFAULT 1");
      exec("UPDATE disputes SET events_kept = 0 WHERE id NOT IN (SELECT DISTINCT dispute FROM events)");
      exec(fmt::format("PRAGMA user_version={}", kSchemaVersion).c_str());
      exec("COMMIT");
    } else if (version != kSchemaVersion) {
      throw StoreError(fmt::format("referee store {}: schema version {}, this referee reads version {}",
                                   file_.string(), version, kSchemaVersion));
    }
    Statement s(*this, "SELECT value FROM meta WHERE key = 'referee_key'");
    if (!s.step()) fail("the referee key is missing");
    const std::vector<uint8_t> key = s.blob(0);
    if (key.size() != referee.size() || !std::equal(key.begin(), key.end(), referee.begin()))
      throw StoreError(
          fmt::format("referee store {}: it belongs to referee key {}, not to this referee's key {}",
                      file_.string(), to_hex(key), to_hex(Digest(referee))));
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

RefereeStore::~RefereeStore() {
  sqlite3_close(db_);
}

void RefereeStore::open_dispute(const Digest& id, const DisputeInput& open, const std::string& client,
                                std::span<const DisputeEvent> events) {
  if (open.kind != DisputeInput::Kind::Open)
    throw StoreError("referee store: a dispute's first input must be its opening");
  std::lock_guard lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    {
      Statement s(*this, "SELECT 1 FROM disputes WHERE id = ?1");
      s.bind(1, id);
      if (s.step())
        throw StoreError(
            fmt::format("referee store {}: dispute {} is already recorded", file_.string(), to_hex(id)));
    }
    {
      Statement s(*this, "INSERT INTO disputes (id, client) VALUES (?1, ?2)");
      s.bind(1, id);
      s.bind(2, client);
      s.step();
    }
    {
      Statement s(*this,
                  "INSERT INTO inputs (dispute, kind, party, envelope, now_ms) VALUES (?1, ?2, 0, ?3, ?4)");
      s.bind(1, id);
      s.bind(2, static_cast<int64_t>(open.kind));
      s.bind(3, open.envelope);
      s.bind(4, static_cast<int64_t>(open.at.time_since_epoch().count()));
      s.step();
    }
    insert_events(id, events);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  ++committed_;
}

void RefereeStore::append(const Digest& id, const DisputeInput& input, const std::vector<uint8_t>* verdict,
                          std::span<const DisputeEvent> events) {
  if (input.kind == DisputeInput::Kind::Open) throw StoreError("referee store: a dispute is opened once");
  std::lock_guard lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    {
      Statement s(*this, "SELECT verdict IS NULL FROM disputes WHERE id = ?1");
      s.bind(1, id);
      if (!s.step())
        throw StoreError(fmt::format("referee store {}: no dispute {}", file_.string(), to_hex(id)));
      if (s.integer(0) == 0)
        throw StoreError(
            fmt::format("referee store {}: dispute {} is already decided", file_.string(), to_hex(id)));
    }
    {
      Statement s(*this,
                  "INSERT INTO inputs (dispute, kind, party, envelope, now_ms) VALUES (?1, ?2, ?3, ?4, ?5)");
      s.bind(1, id);
      s.bind(2, static_cast<int64_t>(input.kind));
      s.bind(3, static_cast<int64_t>(input.party));
      s.bind(4, input.envelope);
      s.bind(5, static_cast<int64_t>(input.at.time_since_epoch().count()));
      s.step();
    }
    if (verdict) {
      Statement s(*this, "UPDATE disputes SET verdict = ?2, decided_at = ?3 WHERE id = ?1");
      s.bind(1, id);
      s.bind(2, *verdict);
      s.bind(3, unix_seconds(std::chrono::system_clock::now()));
      s.step();
    }
    insert_events(id, events);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  ++committed_;
}

// Called with mu_ held, inside a transaction. Appends after the dispute's stored events: the first
// kMaxStoredEvents − 1 keep their rows, and the last row holds the latest event from then on.
void RefereeStore::insert_events(const Digest& id, std::span<const DisputeEvent> events) {
  if (events.empty()) return;
  int64_t n = 0;
  {
    Statement s(*this, "SELECT count(*) FROM events WHERE dispute = ?1");
    s.bind(1, id);
    if (s.step()) n = s.integer(0);
  }
  constexpr auto kLast = static_cast<int64_t>(kMaxStoredEvents) - 1;
  for (const DisputeEvent& e : events) {
    Statement ev(
        *this, "INSERT OR REPLACE INTO events (dispute, n, phase, round, text) VALUES (?1, ?2, ?3, ?4, ?5)");
    ev.bind(1, id);
    ev.bind(2, std::min(n, kLast));
    ev.bind(3, static_cast<int64_t>(e.phase));
    ev.bind(4, static_cast<int64_t>(e.round));
    ev.bind(5, e.text);
    ev.step();
    ++n;
  }
}

void RefereeStore::restore_events(const Digest& id, std::span<const DisputeEvent> events) {
  std::lock_guard lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    {
      Statement s(*this, "SELECT 1 FROM disputes WHERE id = ?1 AND verdict IS NULL");
      s.bind(1, id);
      if (!s.step())
        throw StoreError(
            fmt::format("referee store {}: no undecided dispute {}", file_.string(), to_hex(id)));
    }
    {
      Statement s(*this, "DELETE FROM events WHERE dispute = ?1");
      s.bind(1, id);
      s.step();
    }
    insert_events(id, events);
    {
      Statement s(*this, "UPDATE disputes SET events_kept = 1 WHERE id = ?1");
      s.bind(1, id);
      s.step();
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

size_t RefereeStore::prune(std::chrono::system_clock::time_point decided_before) {
  std::lock_guard lock(mu_);
  exec("BEGIN IMMEDIATE");
  try {
    size_t disputes = 0;
    {
      Statement s(*this,
                  "SELECT count(DISTINCT dispute) FROM inputs WHERE dispute IN "
                  "(SELECT id FROM disputes WHERE verdict IS NOT NULL AND decided_at < ?1)");
      s.bind(1, unix_seconds(decided_before));
      if (s.step()) disputes = static_cast<size_t>(s.integer(0));
    }
    {
      Statement s(*this,
                  "DELETE FROM inputs WHERE dispute IN (SELECT id FROM disputes WHERE verdict IS NOT NULL "
                  "AND decided_at < ?1)");
      s.bind(1, unix_seconds(decided_before));
      s.step();
    }
    exec("COMMIT");
    return disputes;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

size_t RefereeStore::stored_inputs(const Digest& id) {
  std::lock_guard lock(mu_);
  Statement s(*this, "SELECT count(*) FROM inputs WHERE dispute = ?1");
  s.bind(1, id);
  return s.step() ? static_cast<size_t>(s.integer(0)) : 0;
}

std::optional<std::vector<uint8_t>> RefereeStore::verdict(const Digest& id) {
  std::lock_guard lock(mu_);
  Statement s(*this, "SELECT verdict FROM disputes WHERE id = ?1 AND verdict IS NOT NULL");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return s.blob(0);
}

std::vector<DisputeEvent> RefereeStore::events(const Digest& id) {
  std::lock_guard lock(mu_);
  return read_events(id);
}

std::vector<DisputeEvent> RefereeStore::read_events(const Digest& id) {
  std::vector<DisputeEvent> out;
  Statement s(*this, "SELECT phase, round, text FROM events WHERE dispute = ?1 ORDER BY n");
  s.bind(1, id);
  while (s.step()) {
    const int64_t phase = s.integer(0), round = s.integer(1);
    if (phase < 0 || phase > UINT8_MAX || round < 0 || round > UINT32_MAX)
      throw StoreError(fmt::format("referee store {}: dispute {} event {}: phase or round out of range",
                                   file_.string(), to_hex(id), out.size()));
    out.push_back({static_cast<Phase>(phase), static_cast<uint32_t>(round), s.text(2)});
  }
  return out;
}

bool RefereeStore::contains(const Digest& id) {
  std::lock_guard lock(mu_);
  Statement s(*this, "SELECT 1 FROM disputes WHERE id = ?1");
  s.bind(1, id);
  return s.step();
}

StoredDispute RefereeStore::read_dispute(const Digest& id, std::string client, bool events_kept) {
  StoredDispute d;
  d.id = id;
  d.client = std::move(client);
  if (events_kept) d.events = read_events(id);
  Statement s(*this, "SELECT kind, party, envelope, now_ms FROM inputs WHERE dispute = ?1 ORDER BY n");
  s.bind(1, id);
  while (s.step()) {
    const int64_t kind = s.integer(0), party = s.integer(1), now = s.integer(3);
    const size_t i = d.inputs.size();
    const auto bad = [&](const std::string& why) {
      return StoreError(
          fmt::format("referee store {}: dispute {} input {}: {}", file_.string(), to_hex(id), i, why));
    };
    if (kind < 1 || kind > static_cast<int64_t>(DisputeInput::Kind::Opened))
      throw bad("unknown kind " + std::to_string(kind));
    if (party < 0 || party > 1) throw bad("party out of range");
    if (now < 0) throw bad("negative time");
    DisputeInput in;
    in.kind = static_cast<DisputeInput::Kind>(kind);
    in.party = static_cast<int>(party);
    in.envelope = s.blob(2);
    in.at = GameTime(std::chrono::milliseconds(now));
    if ((in.kind == DisputeInput::Kind::Open) != (i == 0))
      throw bad("the opening must be the first input, and only it");
    const bool has_envelope = in.kind == DisputeInput::Kind::Open ||
                              in.kind == DisputeInput::Kind::Envelope ||
                              in.kind == DisputeInput::Kind::Opened;
    if (has_envelope == in.envelope.empty())
      throw bad(has_envelope ? "missing envelope" : "unexpected envelope");
    d.inputs.push_back(std::move(in));
  }
  if (d.inputs.empty())
    throw StoreError(
        fmt::format("referee store {}: dispute {} has no recorded opening", file_.string(), to_hex(id)));
  return d;
}

std::optional<StoredDispute> RefereeStore::load(const Digest& id) {
  std::lock_guard lock(mu_);
  Statement s(*this, "SELECT client, events_kept FROM disputes WHERE id = ?1 AND verdict IS NULL");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_dispute(id, s.text(0), s.integer(1) != 0);
}

std::vector<DisputeInput> RefereeStore::inputs(const Digest& id) {
  std::lock_guard lock(mu_);
  Statement s(*this, "SELECT client FROM disputes WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) return {};
  {
    Statement n(*this, "SELECT count(*) FROM inputs WHERE dispute = ?1");
    n.bind(1, id);
    if (!n.step() || n.integer(0) == 0) return {};  // pruned
  }
  return read_dispute(id, s.text(0), false).inputs;
}

std::vector<DisputeListing> RefereeStore::list(size_t limit) {
  return listings(nullptr, limit);
}

std::optional<DisputeListing> RefereeStore::listing(const Digest& id) {
  std::vector<DisputeListing> one = listings(&id, 1);
  if (one.empty()) return std::nullopt;
  return one[0];
}

std::vector<DisputeListing> RefereeStore::listings(const Digest* only, size_t limit) {
  std::lock_guard lock(mu_);
  std::vector<DisputeListing> out;
  Statement s(*this, only ? "SELECT id, verdict IS NOT NULL, decided_at, (SELECT count(*) FROM inputs WHERE "
                            "dispute = disputes.id) FROM disputes WHERE id = ?2 LIMIT ?1"
                          : "SELECT id, verdict IS NOT NULL, decided_at, (SELECT count(*) FROM inputs WHERE "
                            "dispute = disputes.id) FROM disputes ORDER BY rowid DESC LIMIT ?1");
  s.bind(1, static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
  if (only) s.bind(2, *only);
  while (s.step()) {
    const std::vector<uint8_t> id = s.blob(0);
    if (id.size() != 32)
      throw StoreError(fmt::format("referee store {}: a dispute id is not 32 bytes", file_.string()));
    DisputeListing d;
    std::copy(id.begin(), id.end(), d.id.begin());
    d.decided = s.integer(1) != 0;
    if (d.decided && !s.is_null(2))
      d.decided_at = std::chrono::system_clock::time_point(std::chrono::seconds(s.integer(2)));
    d.inputs = static_cast<size_t>(s.integer(3));
    out.push_back(d);
  }
  return out;
}

std::vector<StoredDispute> RefereeStore::load_open() {
  std::lock_guard lock(mu_);
  std::vector<StoredDispute> out;
  Statement s(*this, "SELECT id, client, events_kept FROM disputes WHERE verdict IS NULL ORDER BY rowid");
  while (s.step()) {
    const std::vector<uint8_t> id = s.blob(0);
    if (id.size() != 32)
      throw StoreError(fmt::format("referee store {}: a dispute id is not 32 bytes", file_.string()));
    Digest d{};
    std::copy(id.begin(), id.end(), d.begin());
    out.push_back(read_dispute(d, s.text(1), s.integer(2) != 0));
  }
  return out;
}

}  // namespace tribunal
