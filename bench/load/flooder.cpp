#include "bench/load/flooder.h"

#include <chrono>
#include <random>

#include "bench/load/load.h"
#include "net/client.h"
#include "net/testing/raw_websocket.h"
#include "protocol/envelope.h"

namespace tribunal::load_bench {
namespace {

// A raw TCP WebSocket client (net/testing/raw_websocket.h, no Beast): handshakes, announces a
// 60000-byte binary frame and then sends its payload one byte every 200 ms. Returns when the referee
// has closed the connection.
void trickle(uint16_t port, const std::string& local, Abuse& abuse) {
  testing::RawWebSocket peer(port, std::chrono::seconds(60), local);
  if (!peer.connected() || !peer.handshake()) return;
  ++abuse.trickle_started;
  const auto start = Clock::now();
  const auto header = testing::masked_binary_header(60000);
  peer.write(header.data(), header.size());
  for (int i = 0; i < 60000 && !abuse.stop; ++i) {
    const uint8_t byte = 0x55;
    if (!peer.write(&byte, 1)) break;
    const std::vector<uint8_t> got = peer.read_some(std::chrono::milliseconds(200));
    if (peer.closed() || testing::is_close_frame(got)) break;  // closed / a close frame
  }
  ++abuse.trickle_closed;
  std::lock_guard lock(abuse.mu);
  abuse.trickle_close_seconds.push_back(seconds_since(start));
}

}  // namespace

void start_abuse(NetContext& ctx, const std::string& url, uint16_t port, size_t silent_count, Abuse& abuse) {
  // 1. Connections from one address that never send anything: past the per-address limit they are
  //    refused (HTTP 429, or closed unanswered while many refusals are in progress); the admitted
  //    ones hold a slot until the first-message timeout.
  ClientOptions silent;
  silent.local_address = "127.0.0.200";
  silent.connect_timeout = std::chrono::seconds(30);
  Client silent_client(ctx, silent);
  for (size_t i = 0; i < silent_count; ++i)
    silent_client.connect(url, [&abuse](std::shared_ptr<Session> s, const std::string& error) {
      if (!s) {
        (error.find("429") != std::string::npos || error.find("503") != std::string::npos
             ? abuse.silent_refused
             : abuse.silent_other)++;
        return;
      }
      ++abuse.silent_open;
      s->set_handlers({{}, [&abuse](Session&, const CloseInfo& info) {
                         ++abuse.silent_closed_by_referee;
                         abuse.note_close("silent", info);
                       }});
      std::lock_guard lock(abuse.mu);
      abuse.held.push_back(s);
    });
  // 2. Oversized frames (1 MiB + 1), 4 connections at a time, over and over until the end.
  abuse.threads.emplace_back([&ctx, &abuse, url] {
    ClientOptions big;
    big.local_address = "127.0.0.201";
    big.session.max_message_bytes = 2 * kMaxMessageBytes;
    const std::vector<uint8_t> oversized(kMaxMessageBytes + 1, 0xAB);
    while (!abuse.stop) {
      std::vector<std::shared_ptr<Session>> sessions;
      for (int i = 0; i < 4; ++i) {
        try {
          auto s = Client(ctx, big).connect_sync(url, {{}, [&abuse](Session&, const CloseInfo& info) {
                                                         ++abuse.big_closed;
                                                         abuse.note_close("oversized", info);
                                                       }});
          if (s->send(oversized)) ++abuse.big_sent;
          sessions.push_back(s);
        } catch (const std::exception&) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // 3. Junk frames (random bytes, 1 B – 64 KiB), 50 per connection, from two threads.
  for (int t = 0; t < 2; ++t)
    abuse.threads.emplace_back([&ctx, &abuse, url, t] {
      ClientOptions junk;
      junk.local_address = "127.0.0.202";
      std::mt19937 rng(7 + t);
      std::vector<std::vector<uint8_t>> frames(64);  // made once
      for (auto& frame : frames) {
        frame.resize(1 + rng() % 65536);
        for (auto& b : frame) b = static_cast<uint8_t>(rng());
      }
      while (!abuse.stop) {
        try {
          auto s = Client(ctx, junk).connect_sync(url, {{}, [&abuse](Session&, const CloseInfo& info) {
                                                          ++abuse.junk_closed;
                                                          abuse.note_close("junk", info);
                                                        }});
          ++abuse.junk_connections;
          for (int k = 0; k < 50; ++k) {
            if (!s->send(frames[rng() % frames.size()])) break;
            ++abuse.junk_frames;
          }
        } catch (const std::exception&) {
        }
      }
    });
  // 4. Tricklers: a frame announced and sent one byte every 200 ms.
  for (int i = 0; i < 20; ++i)
    abuse.threads.emplace_back([port, &abuse] { trickle(port, "127.0.0.203", abuse); });
}

}  // namespace tribunal::load_bench
