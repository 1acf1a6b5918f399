// The referee's connection to one party of a dispute (docs/protocol.md, "Clocks" and "Timeouts"):
// connecting, reconnecting with backoff until the dispute ends, and the party's frames that have
// arrived but wait for the dispute's strand. The referee node (nodes/referee_node.h) owns two per
// dispute and drives them on the dispute's strand.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "net/client.h"
#include "net/session.h"
#include "protocol/game.h"

namespace tribunal::nodes {

/// The strand a dispute runs on: every event of it, one at a time, on the referee's worker pool.
using DisputeStrand = boost::asio::strand<boost::asio::thread_pool::executor_type>;

/// What a provider link hands to its dispute, each call posted to the dispute's strand.
struct ProviderLinkEvents {
  /// A connection attempt ended: `session` (possibly closed meanwhile), or null with `error`.
  std::function<void(std::shared_ptr<Session> session, const std::string& error)> connected;
  /// A frame of `session`, stamped as it arrived: `arrived` (ms) for the game's clocks, `received`
  /// for the answer latency.
  std::function<void(const std::shared_ptr<Session>& session, std::vector<uint8_t> bytes, GameTime arrived,
                     std::chrono::steady_clock::time_point received)>
      frame;
  /// `session`'s connection ended (`session` null when it was already destroyed).
  std::function<void(const std::shared_ptr<Session>& session, const CloseInfo& info)> closed;
};

/// One party's connection of one dispute. Its connection state is touched only on the dispute's
/// strand (the node holds the dispute's lock there); the pending frames are counted from the network
/// threads too, under the link's own lock. The events reach the dispute only while `owner` (the
/// dispute's state, which owns the link) exists: a connection made after it is gone is closed.
class ProviderLink {
 public:
  using SteadyClock = std::chrono::steady_clock;

  /// Reconnecting: first after 100 ms, doubling up to 1 s, until the dispute ends (its clock makes a
  /// provider that stays away forfeit). Short, because the party's clock runs meanwhile: a provider
  /// back from a dropped link waits at most 1 s for the referee.
  static constexpr std::chrono::milliseconds kFirstBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};
  /// Bytes of the party's frames that may wait for the dispute's strand before its reads pause.
  static constexpr size_t kMaxPendingBytes = size_t{4} << 20;

  ProviderLink(DisputeStrand strand, std::weak_ptr<void> owner, ProviderLinkEvents events);
  ProviderLink(const ProviderLink&) = delete;
  ProviderLink& operator=(const ProviderLink&) = delete;

  /// Starts connecting to `url` through `client` (a scheduled retry is cleared); the outcome comes as
  /// the `connected` event, after which attempt_ended() must be called.
  void connect(Client& client, const std::string& url);
  /// The connection attempt has ended (the `connected` event).
  void attempt_ended() { connecting_ = false; }
  /// `session` is the party's connection now; the backoff starts over. True when it is a reconnection
  /// (a connection was made before).
  bool established(std::shared_ptr<Session> session);
  /// The connection was lost or could not be made: the next attempt is scheduled at `now` plus the
  /// backoff (100 ms, then doubled up to 1 s), which is returned. A question on the lost connection
  /// will not be written, so no longer holds the party's timeout back.
  std::chrono::milliseconds lost(GameTime now);
  /// Forgets `session` when it is the current connection (true); false for an older or no session.
  bool closed(const std::shared_ptr<Session>& session);
  /// Closes the current connection, if any (the dispute is decided or suspended).
  void close(CloseCode code, const std::string& reason);

  /// The current connection; null while (re)connecting.
  const std::shared_ptr<Session>& session() const { return session_; }
  /// When the next connection attempt is due, if one is scheduled.
  const std::optional<GameTime>& retry_at() const { return retry_at_; }
  /// A scheduled attempt is due at `now` (not connected, not connecting).
  bool due(GameTime now) const { return !session_ && !connecting_ && retry_at_ && now >= *retry_at_; }

  /// Sends a message that starts no clock (requires session()).
  void send(std::vector<uint8_t> envelope);
  /// Sends a question (requires session()): `written` is called (on the session's strand) once it is
  /// written to the connection, when the party's clock starts; until then (or until the connection is
  /// lost) no timeout is decided for the party. Its answer's latency is measured from now.
  void ask(std::vector<uint8_t> envelope, std::function<void()> written);
  /// The question's write completed (`written` came back to the strand).
  void written() { writing_ = false; }
  /// The party owes the answer to its question since now (a new connection restarts it).
  void restart_answer_clock() { asked_ = SteadyClock::now(); }
  /// An answer was accepted: since when it was owed (once per question), or nullopt.
  std::optional<SteadyClock::time_point> answered();

  /// No timeout may be decided for the party yet: frames of it wait for the strand (or in the socket
  /// while its reads are paused), or a question to it is not yet written.
  bool holds_timeout();

 private:
  void install(const std::shared_ptr<Session>& session);

  DisputeStrand strand_;
  std::weak_ptr<void> owner_;
  ProviderLinkEvents events_;
  std::shared_ptr<Session> session_;  // null while (re)connecting
  bool connecting_ = false;
  std::optional<GameTime> retry_at_;  // when to reconnect, if scheduled
  std::chrono::milliseconds backoff_{0};
  bool connected_once_ = false;                   // later connections are reconnections
  std::optional<SteadyClock::time_point> asked_;  // a question to the party is unanswered since
  bool writing_ = false;                          // a question's write has not completed
  std::mutex pending_mu_;  // pending_, pending_bytes_: network threads add, the strand removes
  size_t pending_ = 0;
  size_t pending_bytes_ = 0;
};

}  // namespace tribunal::nodes
