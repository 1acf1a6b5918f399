#include "net/server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <map>
#include <mutex>

#include "net/context.h"
#include "net/endpoint.h"
#include "net/error.h"
#include "net/server_handshake.h"

namespace tribunal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Shared with the handlers in flight, so that destroying the Server while an accept or a handshake
// is pending is safe.
struct Server::Impl : std::enable_shared_from_this<Impl> {
  Impl(NetContext& context, SessionCallback callback, ServerOptions opts)
      : ctx(context),
        on_session(std::move(callback)),
        options(guard_http(std::move(opts), gone)),
        strand(asio::make_strand(ctx.io())),
        acceptor(strand),
        retry_timer(strand) {}

  // After ~Server the HTTP handler may capture what no longer exists: a request still being read
  // then gets 503.
  static ServerOptions guard_http(ServerOptions o, const std::shared_ptr<std::atomic<bool>>& gone) {
    if (o.http)
      o.http = [gone, http = std::move(o.http)](const HttpRequest& r,
                                                std::function<void(HttpResponse)> respond) {
        if (gone->load()) return respond({503, "text/plain; charset=utf-8", "server stopped\n"});
        http(r, std::move(respond));
      };
    return o;
  }

  std::shared_ptr<std::atomic<bool>> gone = std::make_shared<std::atomic<bool>>(false);  // ~Server ran

  NetContext& ctx;
  const SessionCallback on_session;
  const ServerOptions options;
  asio::strand<asio::io_context::executor_type> strand;  // the acceptor's
  tcp::acceptor acceptor;
  asio::steady_timer retry_timer;
  std::atomic<uint16_t> port{0};
  std::atomic<size_t> connections{0};  // admitted strangers (not trusted) not yet ended
  std::atomic<size_t> trusted{0};      // connections trust() moved out of the limits
  std::atomic<size_t> evicted{0};
  std::atomic<size_t> refusing{0};  // refusals in progress (answering 503/429)
  std::atomic<size_t> refused{0};
  // An admitted connection, until it ends (or is evicted: then it no longer counts).
  struct Entry {
    asio::ip::address address;
    std::weak_ptr<net_detail::ServerConnection> connection;  // set right after the handshake starts
    std::weak_ptr<Session> session;                          // set when the handshake hands it over
    uint64_t session_id = 0;
    bool trusted = false, kept = false;
  };
  std::mutex per_address_mutex;                     // guards the three maps and next_order
  std::map<asio::ip::address, size_t> per_address;  // admitted strangers per peer address
  std::map<uint64_t, Entry> entries;                // by accept order: the oldest first
  std::map<uint64_t, uint64_t> by_session;          // session id → accept order
  uint64_t next_order = 0;
  std::atomic<bool> stopped{false};
  std::atomic<bool> owner_gone{false};  // ~Server ran: on_session may capture what no longer exists
  uint64_t closer_id = 0;
  std::string where;  // "host:port" for logs

  void do_accept() {
    // Each connection gets its own strand, which its session then runs on.
    acceptor.async_accept(asio::make_strand(ctx.io()),
                          [self = shared_from_this()](error_code ec, tcp::socket socket) {
                            self->on_accept(ec, std::move(socket));
                          });
  }

  void on_accept(error_code ec, tcp::socket socket) {
    if (stopped || !acceptor.is_open()) return finish();
    if (ec) {
      // E.g. out of file descriptors: retry shortly rather than spin on the same error.
      net_log("server " + where + ": accept failed: " + ec.message());
      retry_timer.expires_after(std::chrono::milliseconds(100));
      retry_timer.async_wait([self = shared_from_this()](error_code ec) {
        if (ec || self->stopped) return self->finish();
        self->do_accept();
      });
      return;
    }
    error_code remote_ec;
    const auto remote = socket.remote_endpoint(remote_ec);
    if (remote_ec) {  // already gone
      error_code ignored;
      socket.close(ignored);
      return do_accept();
    }
    const auto address = remote.address();
    unsigned refuse_status = 0;
    std::string why;
    std::function<void()> victim;  // closes an older stranger's connection evicted to make room
    uint64_t order = 0;
    {
      std::lock_guard lock(per_address_mutex);
      const size_t from_address = count_of(address);
      const bool over_address =
          options.max_connections_per_address > 0 && from_address >= options.max_connections_per_address;
      const bool over_total = connections >= options.max_connections;
      if ((over_address || over_total) && options.evict_strangers)
        victim = evict_oldest(over_address ? &address : nullptr);
      if (!victim && over_total) {
        refuse_status = 503;
        why = std::to_string(options.max_connections) + " connections open (HTTP 503)";
      } else if (!victim && over_address) {
        refuse_status = 429;
        why = std::to_string(from_address) + " connections open from this address (HTTP 429)";
      } else {
        ++connections;
        ++per_address[address];
        order = next_order++;
        entries[order].address = address;
      }
    }
    if (victim) victim();
    auto self = shared_from_this();
    if (refuse_status != 0) {
      ++refused;
      // Answering a refusal holds the socket until the peer has sent its request; bound how many
      // are held at once, so a flood of refused connections cannot use up file descriptors.
      if (refusing.fetch_add(1) >= options.max_refusing) {
        refusing.fetch_sub(1);
        error_code ignored;
        socket.close(ignored);
        if (!refusal_logged.exchange(true))
          net_log("server " + where + ": refusing connections unanswered (" +
                  std::to_string(options.max_refusing) + " refusals in progress)");
        return do_accept();
      }
      refusal_logged = false;
      net_log("server " + where + ": refusing " + net_detail::endpoint_string(remote) + ": " + why);
      net_detail::serve_connection(ctx, std::move(socket), options, refuse_status, nullptr,
                                   [self] { self->refusing.fetch_sub(1); });
    } else {
      const auto connection = net_detail::serve_connection(
          ctx, std::move(socket), options, 0,
          [self, order](std::shared_ptr<Session> session) { self->hand_over(order, std::move(session)); },
          [self, order] { self->release(order); });
      std::lock_guard lock(per_address_mutex);
      if (auto it = entries.find(order); it != entries.end()) {  // not already ended or evicted
        it->second.connection = connection;
        it->second.session_id = connection->id();
        by_session[connection->id()] = order;
      }
    }
    do_accept();
  }

  // Under per_address_mutex: the strangers admitted from `address`.
  size_t count_of(const asio::ip::address& address) const {
    const auto it = per_address.find(address);
    return it == per_address.end() ? 0 : it->second;
  }

  // Under per_address_mutex: a stranger connection stops counting (it ended, was evicted or trusted).
  void uncount(const Entry& e) {
    connections.fetch_sub(1);
    auto it = per_address.find(e.address);
    if (it != per_address.end() && --it->second == 0) per_address.erase(it);
  }

  // Under per_address_mutex: forgets the oldest stranger connection that is neither trusted nor kept
  // (from `address` when given) and returns what closes it (its session once handed over, else its
  // handshake); empty when there is none.
  std::function<void()> evict_oldest(const asio::ip::address* address) {
    static constexpr const char* kWhy = "evicted: newer connections need the room";
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      Entry& e = it->second;
      if (e.trusted || e.kept || (address && e.address != *address)) continue;
      std::function<void()> close;
      if (auto session = e.session.lock())
        close = [session] { session->close(CloseCode::GoingAway, kWhy); };
      else if (auto connection = e.connection.lock())
        close = [connection] { connection->close(CloseCode::GoingAway, kWhy); };
      else
        continue;  // being made or already ending: its release() comes
      uncount(e);
      by_session.erase(e.session_id);
      entries.erase(it);
      ++evicted;
      return close;
    }
    return {};
  }

  // An admitted connection has ended (any thread).
  void release(uint64_t order) {
    std::lock_guard lock(per_address_mutex);
    const auto it = entries.find(order);
    if (it == entries.end()) return;  // evicted: it stopped counting then
    if (it->second.trusted)
      trusted.fetch_sub(1);
    else
      uncount(it->second);
    if (it->second.session_id != 0) by_session.erase(it->second.session_id);
    entries.erase(it);
  }

  // The entry of one of this server's sessions, under per_address_mutex; null if unknown.
  Entry* entry_of(const Session& session) {
    const auto it = by_session.find(session.id());
    if (it == by_session.end()) return nullptr;
    const auto e = entries.find(it->second);
    return e == entries.end() ? nullptr : &e->second;
  }

  bool trust(const Session& session) {
    std::lock_guard lock(per_address_mutex);
    Entry* e = entry_of(session);
    if (!e) return false;
    if (e->trusted) return true;
    if (trusted.load() >= options.max_trusted_connections) return false;
    e->trusted = true;
    trusted.fetch_add(1);
    uncount(*e);
    return true;
  }

  void keep(const Session& session) {
    std::lock_guard lock(per_address_mutex);
    if (Entry* e = entry_of(session)) e->kept = true;
  }

  // On the session's strand, right after its handshake.
  void hand_over(uint64_t order, std::shared_ptr<Session> session) {
    {
      std::lock_guard lock(per_address_mutex);
      if (auto it = entries.find(order); it != entries.end()) it->second.session = session;
    }
    // After stop() a connection already accepted is still handed over (and NetContext::shutdown
    // then closes it with 1001); after ~Server there is nobody to hand it to.
    if (owner_gone) {
      session->close(CloseCode::GoingAway, "server stopped");
      return;
    }
    try {
      on_session(session);
    } catch (const std::exception& e) {
      net_log("server " + where + ": on_session threw: " + e.what() + "; closing 1011");
      session->close(CloseCode::InternalError, "internal error");
    }
  }

  // On the strand: the accept loop has ended.
  void finish() {
    if (closer_id) ctx.remove_closer(std::exchange(closer_id, 0));
  }

  void stop() {
    if (stopped.exchange(true)) return;
    asio::post(strand, [self = shared_from_this()] {
      error_code ignored;
      self->retry_timer.cancel();
      self->acceptor.close(ignored);  // the pending accept completes with operation_aborted
      if (!self->acceptor_started) self->finish();
    });
  }

  bool acceptor_started = false;            // on the strand
  std::atomic<bool> refusal_logged{false};  // one log line per burst of unanswered refusals
};

Server::Server(NetContext& ctx, SessionCallback on_session, ServerOptions options)
    : impl_(std::make_shared<Impl>(ctx, std::move(on_session), std::move(options))) {}

Server::~Server() {
  impl_->owner_gone = true;
  impl_->gone->store(true);
  stop();
}

uint16_t Server::listen(const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  if (impl_->stopped) throw NetError("cannot listen on " + where + ": server stopped");
  if (impl_->port != 0) throw NetError("cannot listen on " + where + ": already listening");
  error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(impl_->ctx.io());
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty())
      throw NetError("cannot listen on " + where + ": cannot resolve host: " + ec.message());
    endpoint = results.begin()->endpoint();
  }
  auto& acceptor = impl_->acceptor;
  // Set up on the caller's thread: nothing else touches the acceptor until do_accept is posted.
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    acceptor.close(ignored);
    throw NetError("cannot listen on " + where + ": " + ec.message());
  }
  const uint16_t bound = acceptor.local_endpoint(ec).port();
  impl_->port = bound;
  impl_->where = host + ":" + std::to_string(bound);
  impl_->closer_id = impl_->ctx.add_closer([weak = std::weak_ptr<Impl>(impl_)] {
    if (auto self = weak.lock()) self->stop();
  });
  asio::post(impl_->strand, [self = impl_] {
    self->acceptor_started = true;
    if (self->stopped) return self->finish();
    self->do_accept();
  });
  return bound;
}

uint16_t Server::port() const {
  return impl_->port;
}

void Server::stop() {
  impl_->stop();
}

bool Server::trust(const Session& session) {
  return impl_->trust(session);
}

void Server::keep(const Session& session) {
  impl_->keep(session);
}

size_t Server::connection_count() const {
  return impl_->connections + impl_->trusted;
}

size_t Server::trusted_count() const {
  return impl_->trusted;
}

size_t Server::evicted_count() const {
  return impl_->evicted;
}

size_t Server::refused_count() const {
  return impl_->refused;
}

}  // namespace tribunal
