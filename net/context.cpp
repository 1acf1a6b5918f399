#include "net/context.h"

#include <sys/resource.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <csignal>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/error.h"

namespace tribunal {

namespace asio = boost::asio;

struct NetContext::Impl {
  explicit Impl(int thread_count)
      : threads(thread_count < 1 ? 1 : thread_count),
        io(threads),
        strand(asio::make_strand(io)),
        work(asio::make_work_guard(io)),
        grace_timer(strand) {}

  int threads;
  asio::io_context io;
  // Serializes the context's own objects (signal set, grace timer, work guard) across I/O threads.
  asio::strand<asio::io_context::executor_type> strand;
  // Keeps run() from returning while nothing is connected; released by shutdown.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<asio::signal_set> signals;
  asio::steady_timer grace_timer;
  std::chrono::milliseconds grace{10000};

  mutable std::mutex mutex;  // guards the fields below
  std::map<uint64_t, std::function<void()>> closers;
  uint64_t next_closer = 1;
  bool shutting_down = false;
  bool finished = false;

  std::vector<std::thread> background;

  void run_io() {
    // Our handlers catch their own exceptions; this only guards against a stray one from an app's
    // own work on io(), so that one bad handler does not end the whole service.
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        net_log(std::string("unhandled exception in an I/O handler: ") + e.what());
      } catch (...) {
        net_log("unhandled exception in an I/O handler");
      }
    }
  }

  // On the strand: everything has closed (or the grace period ran out); let run() return.
  void finish_shutdown() {
    if (finished) return;
    finished = true;
    grace_timer.cancel();
    if (signals) {
      boost::system::error_code ignored;
      signals->cancel(ignored);
    }
    work.reset();
  }

  void wait_signal(NetContext* owner) {
    signals->async_wait([this, owner](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      if (owner->shutting_down()) {
        net_log("signal " + std::to_string(signo) + " during shutdown: stopping now");
        io.stop();
        return;
      }
      net_log("signal " + std::to_string(signo) + ": shutting down");
      owner->shutdown();
      wait_signal(owner);
    });
  }
};

NetContext::NetContext(int threads, bool handle_signals) : impl_(std::make_unique<Impl>(threads)) {
  if (handle_signals) {
    impl_->signals.emplace(impl_->strand, SIGINT, SIGTERM);
    impl_->wait_signal(this);
  }
}

NetContext::~NetContext() {
  stop();
  join();
}

asio::io_context& NetContext::io() {
  return impl_->io;
}

void NetContext::run() {
  std::vector<std::thread> helpers;
  for (int i = 1; i < impl_->threads; ++i) helpers.emplace_back([this] { impl_->run_io(); });
  impl_->run_io();
  for (auto& t : helpers) t.join();
}

void NetContext::start() {
  for (int i = 0; i < impl_->threads; ++i) impl_->background.emplace_back([this] { impl_->run_io(); });
}

void NetContext::join() {
  for (auto& t : impl_->background)
    if (t.joinable()) t.join();
  impl_->background.clear();
}

void NetContext::shutdown() {
  std::vector<std::function<void()>> to_close;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->shutting_down) return;
    impl_->shutting_down = true;
    for (auto& [id, close] : impl_->closers) to_close.push_back(close);
  }
  for (auto& close : to_close) {
    try {
      close();
    } catch (const std::exception& e) {
      net_log(std::string("shutdown: a closer threw: ") + e.what());
    }
  }
  asio::post(impl_->strand, [impl = impl_.get()] {
    {
      std::lock_guard lock(impl->mutex);
      if (impl->closers.empty()) {
        impl->finish_shutdown();
        return;
      }
    }
    impl->grace_timer.expires_after(impl->grace);
    impl->grace_timer.async_wait([impl](const boost::system::error_code& ec) {
      if (ec || impl->finished) return;
      size_t open = 0;
      {
        std::lock_guard lock(impl->mutex);
        open = impl->closers.size();
      }
      net_log("shutdown grace period over with " + std::to_string(open) + " still open: stopping");
      impl->finish_shutdown();
      impl->io.stop();
    });
  });
}

void NetContext::stop() {
  impl_->io.stop();
}

bool NetContext::shutting_down() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->shutting_down;
}

void NetContext::set_shutdown_grace(std::chrono::milliseconds grace) {
  asio::post(impl_->strand, [impl = impl_.get(), grace] { impl->grace = grace; });
}

uint64_t NetContext::add_closer(std::function<void()> close) {
  uint64_t id = 0;
  bool late = false;
  {
    std::lock_guard lock(impl_->mutex);
    id = impl_->next_closer++;
    impl_->closers.emplace(id, close);
    late = impl_->shutting_down;
  }
  // Registered after shutdown began (e.g. a connection accepted in the meantime): close it now.
  if (late) asio::post(impl_->io, std::move(close));
  return id;
}

void NetContext::remove_closer(uint64_t id) {
  bool done = false;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->closers.erase(id) == 0) return;
    done = impl_->shutting_down && impl_->closers.empty();
  }
  if (done) asio::post(impl_->strand, [impl = impl_.get()] { impl->finish_shutdown(); });
}

size_t raise_fd_limit() noexcept {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<size_t>(limit.rlim_cur);
}

}  // namespace tribunal
