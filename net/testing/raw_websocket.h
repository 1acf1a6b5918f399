// A WebSocket client on a plain POSIX TCP socket, for tests and benchmarks of peers that misbehave
// below the frame level (a frame announced and never finished, a connection that never upgrades),
// which net/client.h's well-behaved Beast client cannot send. Test support, not used by the nodes:
// tests/net and bench/load (its trickling flooder) share it. Loopback IPv4 only.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tribunal::testing {

/// One TCP connection to a WebSocket server on 127.0.0.1, driven byte by byte.
class RawWebSocket {
 public:
  /// Connects to 127.0.0.1:`port`, from the loopback address `local_address` when it is not empty
  /// (e.g. "127.0.0.203", to test per-address limits). Blocking reads (handshake(), at_eof()) give up
  /// after `receive_timeout`. Never throws: connected() says whether the connection was made.
  RawWebSocket(uint16_t port, std::chrono::milliseconds receive_timeout,
               const std::string& local_address = {});
  ~RawWebSocket();  ///< closes the socket without a close frame
  RawWebSocket(const RawWebSocket&) = delete;
  RawWebSocket& operator=(const RawWebSocket&) = delete;

  bool connected() const { return connected_; }
  /// Sends `n` bytes as they are (no framing); false if the connection failed.
  bool write(const void* data, size_t n);
  /// Sends the HTTP upgrade request (a fixed Sec-WebSocket-Key) and reads the response headers, byte
  /// by byte so that nothing after them is consumed; true if the server switched protocols (101).
  bool handshake();
  /// Waits up to `wait` for data and returns what came (at most 4096 bytes); empty on timeout, end
  /// of stream or error — closed() tells those apart.
  std::vector<uint8_t> read_some(std::chrono::milliseconds wait);
  /// Whether a read has seen the server hang up (end of stream) or a socket error.
  bool closed() const { return closed_; }
  /// Reads one byte (waiting up to the receive timeout); true if the server had hung up.
  bool at_eof();

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

/// The 8-byte header of a final, masked binary frame announcing `length` payload bytes (the 16-bit
/// length form, for 126 ≤ length ≤ 65535), with the mask key 1 2 3 4.
std::array<uint8_t, 8> masked_binary_header(uint16_t length);

/// Whether `bytes` starts with a close frame (opcode 8, FIN) from the server.
bool is_close_frame(const std::vector<uint8_t>& bytes);

/// The status code of an unmasked server close frame (payload < 126 bytes) at the start of `bytes`;
/// 0 if there is none or it carries no code.
unsigned close_code_of(const std::vector<uint8_t>& bytes);

}  // namespace tribunal::testing
