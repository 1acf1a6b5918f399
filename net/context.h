// The io_context runner of the transport and its graceful shutdown (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace tribunal {

/// Owns the io_context that servers, clients and sessions run on, the threads that run it, and
/// graceful shutdown: on SIGINT/SIGTERM (or shutdown()) it stops every server accepting, closes
/// every session with 1001 GoingAway, and run() returns once they have all finished — or after the
/// grace period, whichever comes first. A second signal during shutdown stops at once.
///
/// Single use: once run() has returned the context cannot be restarted. It must outlive every
/// Server, Client and Session created on it.
class NetContext {
 public:
  /// `threads` ≥ 1 threads will run the io_context; `handle_signals` installs the SIGINT/SIGTERM
  /// handler (tests that run several contexts in one process pass false).
  explicit NetContext(int threads = 1, bool handle_signals = true);
  /// Stops the io_context at once (no close handshakes) and joins background threads.
  ~NetContext();
  NetContext(const NetContext&) = delete;
  NetContext& operator=(const NetContext&) = delete;

  /// The underlying io_context (include <boost/asio/io_context.hpp> to use it).
  boost::asio::io_context& io();

  /// Runs the io_context on `threads` threads, the caller's included, until shutdown has finished
  /// or stop() is called.
  void run();
  /// Runs the io_context on `threads` background threads and returns at once; see join().
  void start();
  /// Waits for the background threads of start() to return (after shutdown() or stop()).
  void join();

  /// Graceful shutdown as described above. Thread-safe, idempotent, may be called before run().
  void shutdown();
  /// Stops the io_context at once; pending handlers are dropped. Thread-safe.
  void stop();
  /// True once shutdown() has been called (or a signal received).
  bool shutting_down() const;

  /// How long shutdown waits for close handshakes before stopping (default 10 s).
  void set_shutdown_grace(std::chrono::milliseconds grace);

  /// Registers something shutdown must close: `close` is called once, from any thread, when
  /// shutdown starts (at once if it already has). Shutdown finishes when every registration has
  /// been removed. Servers and sessions register themselves; apps may add their own.
  uint64_t add_closer(std::function<void()> close);
  /// Removes a registration (it has finished closing). Unknown ids are ignored.
  void remove_closer(uint64_t id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Raises this process's soft limit on open files (RLIMIT_NOFILE) to its hard limit and returns the
/// new soft limit. A referee holds three sockets per dispute (client and both providers); the common
/// default soft limit of 1024 caps it near 300 disputes. Call once at startup, before listening.
/// Never throws; on failure returns the current limit.
size_t raise_fd_limit() noexcept;

}  // namespace tribunal
