// A WebSocket man in the middle for tests and campaigns: the on-path attacker of plain ws://
// (docs/protocol.md, "Threat model", "Lost frames"). It accepts the referee's connections, connects
// each one on to the provider behind it, and forwards every frame in both directions — unless its
// filter drops, delays, duplicates it, or cuts the connection. It never forges a frame: what it can do
// to a dispute is exactly what anyone on the path can, so an honest provider behind it must still win
// (then its clock pays for the faults, never its verdict).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/client.h"
#include "net/context.h"
#include "net/server.h"

namespace tribunal::scenarios {

/// Which way a frame goes through the proxy.
enum class Direction : uint8_t {
  ToProvider,  ///< referee → provider (questions, the forwarded DisputeOpen)
  ToReferee,   ///< provider → referee (answers)
};

/// What the proxy does with one frame.
struct FrameFault {
  enum class Kind : uint8_t {
    Forward,    ///< pass it on (after `delay`)
    Drop,       ///< never deliver it
    Duplicate,  ///< deliver it twice (the copy after `delay`)
    Cut,        ///< drop it and close both sides of this connection (going away)
  };
  Kind kind = Kind::Forward;
  /// Forward: hold the frame this long; frames behind it are not held, so a delay reorders.
  std::chrono::milliseconds delay{0};
};

/// Decides the fate of each frame: `connection` counts the proxy's connections from 0, `index` the
/// frames of that connection in `direction` from 0. Called on a network thread; must not block.
using FrameFilter = std::function<FrameFault(Direction direction, uint64_t connection, uint64_t index,
                                             const std::vector<uint8_t>& frame)>;

/// What the proxy did (counters, for assertions that the scheduled faults acted).
struct ProxyCounts {
  uint64_t connections = 0;
  uint64_t forwarded = 0;
  uint64_t dropped = 0;
  uint64_t delayed = 0;
  uint64_t duplicated = 0;
  uint64_t cut = 0;
};

/// Listens on loopback and forwards to `upstream` (a ws:// URL). Its NetContext must outlive it and be
/// running. Thread-safe.
class FaultProxy {
 public:
  /// `upstream` may be set later (set_upstream), before the first connection comes.
  FaultProxy(NetContext& ctx, std::string upstream, FrameFilter filter);
  ~FaultProxy();
  /// Where the proxy forwards new connections (a provider listening after the proxy, whose signed
  /// endpoint is the proxy's URL).
  void set_upstream(std::string upstream);
  /// Binds 127.0.0.1 on a free port; returns the ws:// URL to give out instead of the upstream's.
  std::string listen();
  ProxyCounts counts() const;

 private:
  struct Link;
  void on_session(std::shared_ptr<Session> downstream);

  NetContext& ctx_;
  std::string upstream_;
  FrameFilter filter_;
  Server server_;
  Client client_;
  mutable std::mutex mu_;
  ProxyCounts counts_;
  std::vector<std::weak_ptr<Link>> links_;
};

}  // namespace tribunal::scenarios
