// The WebSocket session behind Session: the frame pump that runs once a handshake
// (net/server_handshake.cpp, net/client_connector.cpp) has handed over an open stream (net/stream.h).
// It only moves frames: reads one message at a time, writes behind a bounded queue, enforces the
// size limits and the receive timeouts, and closes with the right code (docs/protocol.md, "Messages").
//
// Concurrency: the stream, both timers and every field below the "strand only" mark are touched only
// on the session's strand (the stream's executor). send() and close() may come from any thread: they
// check/update atomics and post to the strand, so the posted messages and the close keep their order.
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <optional>
#include <utility>

#include "net/close_info.h"
#include "net/context.h"
#include "net/error.h"
#include "net/receive_limits.h"
#include "net/stream.h"
#include "net/write_budget.h"

namespace tribunal::net_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using beast::error_code;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<uint64_t> g_next_session_id{1};

constexpr size_t kMaxReasonBytes = 123;
// A receive buffer grown past this by a large message is shrunk after delivering it: the game's
// questions and answers fit, while an opened 64 KiB tensor chunk's buffer is given back, so a session
// does not keep one for its lifetime (docs/performance.md, "The referee under load").
constexpr size_t kKeptBufferBytes = 4 * 1024;

std::string ms_string(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

template <bool kTls>
class WsSession final : public Session, public std::enable_shared_from_this<WsSession<kTls>> {
 public:
  // `ws` has completed its WebSocket handshake; `tls` keeps its SSL context alive (kTls only).
  WsSession(NetContext& ctx, WsStream<kTls> ws, const SessionOptions& options,
            std::shared_ptr<TlsContext> tls, const SessionStart& start)
      : Session(start.id),
        ctx_(ctx),
        options_(options),
        tls_(std::move(tls)),
        ws_(std::move(ws)),
        watchdog_(ws_.get_executor()),
        deadline_timer_(ws_.get_executor()) {
    remote_ = start.remote;
  }

  // ---- Session interface (any thread) ----

  void set_handlers(SessionHandlers handlers) override {
    // dispatch: inline when called from on_session / connect (already on the strand), so the
    // handlers are in place before the first read completes.
    asio::dispatch(ws_.get_executor(), [self = this->shared_from_this(), h = std::move(handlers)]() mutable {
      if (self->state_ != State::Closed) self->handlers_ = std::move(h);
    });
  }

  bool send(std::vector<uint8_t> message) override { return send_and_notify(std::move(message), {}); }

  bool send_and_notify(std::vector<uint8_t> message, std::function<void()> on_written) override {
    if (!accepting_.load()) return false;
    const size_t size = message.size();
    if (size > options_.max_message_bytes) {
      log("refusing to send " + std::to_string(size) + " bytes (limit " +
          std::to_string(options_.max_message_bytes) + ")");
      return false;
    }
    // Counted from here until the write completes (or the message is dropped).
    if (const auto claim = budget_.claim(size); !claim.ok) {
      if (accepting_.exchange(false)) {
        log("write queue full (" + std::to_string(claim.messages) + " messages, " +
            std::to_string(claim.bytes) + " bytes): the peer reads too slowly; closing 1008");
        asio::post(ws_.get_executor(), [self = this->shared_from_this()] {
          self->begin_close(CloseCode::PolicyViolation, "write queue full", /*flush=*/false);
        });
      }
      return false;
    }
    asio::post(ws_.get_executor(),
               [self = this->shared_from_this(), m = std::move(message),
                w = std::move(on_written)]() mutable { self->enqueue(std::move(m), std::move(w)); });
    return true;
  }

  bool wait_for_room(size_t bytes) override { return budget_.wait_for_room(bytes, accepting_); }

  void close(CloseCode code, std::string reason) override {
    accepting_.store(false);
    // post, not dispatch: messages sent before this call are still in the strand's queue and must
    // be queued for writing before the close begins.
    asio::post(ws_.get_executor(), [self = this->shared_from_this(), code, r = std::move(reason)]() mutable {
      self->begin_close(code, std::move(r), /*flush=*/true);
    });
  }

  bool is_open() const override { return accepting_.load(); }

  void set_reading(bool on) override {
    asio::dispatch(ws_.get_executor(), [self = this->shared_from_this(), on] {
      self->reading_ = on;
      if (!on || !self->read_parked_) return;
      self->read_parked_ = false;
      self->limits_.restart_idle(Clock::now());
      self->do_read();
    });
  }

  // On the strand, right after the WebSocket handshake: the session opens, `on_open` gets it, reading
  // starts, and a close asked for during the upgrade begins.
  void run(SessionStart start) {
    on_end_ = std::move(start.on_end);
    ws_.read_message_max(options_.max_message_bytes);
    ws_.binary(true);
    // One frame per message: the design's unit is one frame = one envelope.
    ws_.auto_fragment(false);
    accepting_.store(true);
    // Registered before the handshake's own registration ends, so shutdown never misses the
    // connection; a shutdown already under way closes it at once (after on_open, as close() posts).
    closer_id_ = ctx_.add_closer([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->close(CloseCode::GoingAway, "shutting down");
    });
    try {
      if (start.on_open) start.on_open(this->shared_from_this());
    } catch (const std::exception& e) {
      log(std::string("session callback threw: ") + e.what());
      begin_close(CloseCode::InternalError, "internal error", false);
    } catch (...) {
      log("session callback threw");
      begin_close(CloseCode::InternalError, "internal error", false);
    }
    do_read();
    arm_watchdog();
    if (start.pending_close)
      begin_close(start.pending_close->first, std::move(start.pending_close->second), true);
  }

 private:
  enum class State { Open, Closing, Closed };

  void log(const std::string& what) const {
    net_log("session " + std::to_string(id()) + " " + remote_ + ": " + what);
  }

  // ---- reading (strand) ----

  // One message at a time, read in pieces (so that a message's start is seen, for message_timeout)
  // into buffer_, which Beast bounds by max_message_bytes. The next read starts only once the
  // handler has returned: a peer sending faster than we handle is held back by TCP, nothing queues.
  void do_read() {
    ws_.async_read_some(buffer_, 0,
                        [self = this->shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    if (ec) {
      read_done_ = true;
      read_error_ = ec;
      return maybe_finish();
    }
    const bool done = ws_.is_message_done();
    if (state_ != State::Open) {
      // Closing: keep reading until the peer's close frame, but deliver nothing more.
      buffer_.consume(buffer_.size());
      return do_read();
    }
    if (!limits_.in_message()) {
      if (!ws_.got_binary()) {
        buffer_.consume(buffer_.size());
        log("text frame received (binary only): closing 1003");
        begin_close(kCloseUnsupportedData, "binary frames only", /*flush=*/false);
        return do_read();
      }
      if (!done) {
        limits_.message_started(Clock::now());
        arm_watchdog();
      }
    }
    if (!done) return do_read();
    limits_.message_done(Clock::now());
    std::vector<uint8_t> message(buffer_.size());
    asio::buffer_copy(asio::buffer(message), buffer_.data());
    buffer_.consume(buffer_.size());
    // Do not keep a large message's capacity for the session's lifetime (hundreds of sessions).
    if (buffer_.capacity() > kKeptBufferBytes) buffer_.shrink_to_fit();
    if (handlers_.on_message) {
      try {
        handlers_.on_message(*this, std::move(message));
      } catch (const std::exception& e) {
        log(std::string("on_message threw: ") + e.what() + "; closing 1011");
        begin_close(CloseCode::InternalError, "internal error", false);
      } catch (...) {
        log("on_message threw; closing 1011");
        begin_close(CloseCode::InternalError, "internal error", false);
      }
    }
    if (!reading_ && state_ == State::Open) {
      read_parked_ = true;  // set_reading(true) or a close resumes
      return;
    }
    do_read();
  }

  // One timer for the receive limits, armed for the earliest deadline; when it fires the limits are
  // checked against the current state and it is re-armed (it is not restarted on every message).
  void arm_watchdog() {
    if (state_ != State::Open) return;
    const auto next = limits_.next_deadline();
    if (!next || (watchdog_armed_ && watchdog_at_ <= *next)) return;
    watchdog_armed_ = true;
    watchdog_at_ = *next;
    watchdog_.expires_at(*next);  // cancels an earlier wait (its handler sees operation_aborted)
    watchdog_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->state_ != State::Open) return;
      self->watchdog_armed_ = false;
      self->check_limits();
    });
  }

  void check_limits() {
    const auto now = Clock::now();
    if (read_parked_) {  // paused by the application: not the peer's silence
      limits_.restart_idle(now);
      return arm_watchdog();
    }
    switch (limits_.check(now)) {
      case ReceiveBreach::MessageTooSlow:
        log("message not complete after " + ms_string(options_.message_timeout) + " (" +
            std::to_string(buffer_.size()) + " bytes so far): closing 1008");
        return begin_close(CloseCode::PolicyViolation, "message too slow", /*flush=*/false);
      case ReceiveBreach::NoMessage:
        log("no message within " + ms_string(options_.first_message_timeout) + ": closing 1001");
        return begin_close(CloseCode::GoingAway, "no message", /*flush=*/false);
      case ReceiveBreach::Idle:
        log("idle for " + ms_string(options_.idle_timeout) + ": closing 1001");
        return begin_close(CloseCode::GoingAway, "idle timeout", /*flush=*/true);
      case ReceiveBreach::None:
        break;
    }
    arm_watchdog();
  }

  // ---- writing (strand) ----

  void enqueue(std::vector<uint8_t> message, std::function<void()> on_written) {
    if (state_ != State::Open || write_failed_) {  // closed after send() accepted it: drop
      budget_.release(message.size());
      return;
    }
    queue_.push_back(std::move(message));
    written_.push_back(std::move(on_written));
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    ws_.async_write(asio::buffer(queue_.front()),
                    [self = this->shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    writing_ = false;
    budget_.release(queue_.front().size());
    queue_.pop_front();
    std::function<void()> written = std::move(written_.front());
    written_.pop_front();
    if (!ec && written) written();
    if (state_ == State::Closed) return drop_queue();
    if (ec) {
      if (state_ == State::Open && !write_failed_) log("write failed: " + ec.message());
      accepting_.store(false);
      drop_queue();
      if (std::exchange(write_failed_, true)) return;
      // The read normally fails right after (and may first pick up the peer's close frame, which says
      // why); the deadline only covers a read that would not end by itself.
      if (state_ == State::Open) {
        deadline_timer_.expires_after(options_.close_timeout);
        deadline_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
          if (!ec && self->state_ != State::Closed) beast::get_lowest_layer(self->ws_).close();
        });
      }
      return;
    }
    if (!queue_.empty()) return do_write();
    if (state_ == State::Closing) start_close_op();
  }

  // Drops queued messages, keeping the one being written (its buffer must outlive the write).
  void drop_queue() {
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      budget_.release(queue_.back().size());
      queue_.pop_back();
      written_.pop_back();
    }
  }

  // ---- closing (strand) ----

  void begin_close(CloseCode code, std::string reason, bool flush) {
    if (state_ != State::Open) return;
    state_ = State::Closing;
    accepting_.store(false);
    closed_by_us_ = true;
    close_code_ = is_sendable(code) ? code : CloseCode::InternalError;
    if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
    close_reason_ = std::move(reason);
    if (!flush) drop_queue();
    if (read_parked_) {  // read the peer's close reply
      read_parked_ = false;
      do_read();
    }
    // Bounds the flush and the close handshake together: a peer that stops reading cannot hold us.
    deadline_timer_.expires_after(options_.close_timeout);
    deadline_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->state_ == State::Closed) return;
      self->log("close handshake not finished after " + ms_string(self->options_.close_timeout) +
                ": dropping the connection");
      self->close_timed_out_ = true;
      beast::get_lowest_layer(self->ws_).close();
    });
    if (!writing_) start_close_op();
  }

  void start_close_op() {
    if (close_op_started_ || read_done_) return maybe_finish();
    close_op_started_ = true;
    close_op_pending_ = true;
    ws_.async_close(websocket::close_reason(static_cast<websocket::close_code>(close_code_), close_reason_),
                    [self = this->shared_from_this()](error_code) {
                      // Errors here show up in the read as well; the end is reported once, there.
                      self->close_op_pending_ = false;
                      self->maybe_finish();
                    });
  }

  // The session ends when the read loop has stopped and our close handshake (if any) is over.
  void maybe_finish() {
    if (state_ == State::Closed || !read_done_ || close_op_pending_) return;
    state_ = State::Closed;
    accepting_.store(false);
    watchdog_.cancel();
    deadline_timer_.cancel();
    beast::get_lowest_layer(ws_).close();
    drop_queue();

    const CloseInfo info = close_info({.read_error = read_error_,
                                       .peer_reason = ws_.reason(),
                                       .closed_by_us = closed_by_us_,
                                       .our_code = close_code_,
                                       .our_reason = close_reason_,
                                       .close_timed_out = close_timed_out_,
                                       .max_message_bytes = options_.max_message_bytes});
    log("closed " + to_string(info));

    if (closer_id_) ctx_.remove_closer(closer_id_);
    if (on_end_) std::exchange(on_end_, nullptr)();
    // Moved out first: the handlers often capture this session, and dropping them breaks the cycle.
    auto handlers = std::move(handlers_);
    handlers_ = {};
    if (handlers.on_close) {
      try {
        handlers.on_close(*this, info);
      } catch (const std::exception& e) {
        log(std::string("on_close threw: ") + e.what());
      } catch (...) {
        log("on_close threw");
      }
    }
  }

  NetContext& ctx_;
  const SessionOptions options_;
  const std::shared_ptr<TlsContext> tls_;  // kept alive while the stream uses its context
  WsStream<kTls> ws_;
  asio::steady_timer watchdog_;        // receive limits: idle, first message, message
  asio::steady_timer deadline_timer_;  // our close handshake, or the read after a failed write

  std::atomic<bool> accepting_{false};                                           // send() takes messages
  WriteBudget budget_{options_.max_queued_messages, options_.max_queued_bytes};  // the write queue's bound

  // ---- strand only ----
  State state_ = State::Open;
  beast::flat_buffer buffer_;
  SessionHandlers handlers_;
  uint64_t closer_id_ = 0;
  std::function<void()> on_end_;
  ReceiveLimits limits_{options_, Clock::now()};  // idle, first message, message: from the handshake
  bool reading_ = true;                           // set_reading
  bool read_parked_ = false;                      // no read pending because reading is paused
  bool watchdog_armed_ = false;
  Clock::time_point watchdog_at_;
  std::deque<std::vector<uint8_t>> queue_;
  std::deque<std::function<void()>> written_;  // queue_'s on_written callbacks, one per message
  bool writing_ = false;
  bool write_failed_ = false;
  bool read_done_ = false;
  error_code read_error_;
  bool closed_by_us_ = false;
  bool close_op_started_ = false;
  bool close_op_pending_ = false;
  bool close_timed_out_ = false;
  CloseCode close_code_ = CloseCode::Normal;
  std::string close_reason_;
};

template <bool kTls>
std::shared_ptr<Session> make_session(NetContext& ctx, WsStream<kTls> ws, const SessionOptions& options,
                                      std::shared_ptr<TlsContext> tls, SessionStart start) {
  auto session = std::make_shared<WsSession<kTls>>(ctx, std::move(ws), options, std::move(tls), start);
  session->run(std::move(start));
  return session;
}

}  // namespace

uint64_t next_session_id() {
  return g_next_session_id.fetch_add(1);
}

std::shared_ptr<Session> start_session(NetContext& ctx, WsStream<false> ws, const SessionOptions& options,
                                       SessionStart start) {
  return make_session<false>(ctx, std::move(ws), options, nullptr, std::move(start));
}

std::shared_ptr<Session> start_session(NetContext& ctx, WsStream<true> ws, const SessionOptions& options,
                                       std::shared_ptr<TlsContext> tls, SessionStart start) {
  return make_session<true>(ctx, std::move(ws), options, std::move(tls), std::move(start));
}

}  // namespace tribunal::net_detail
