#include "net/testing/raw_websocket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tribunal::testing {

RawWebSocket::RawWebSocket(uint16_t port, std::chrono::milliseconds receive_timeout,
                           const std::string& local_address) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (!local_address.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, local_address.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
      return;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(receive_timeout).count();
  timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  connected_ = true;
}

RawWebSocket::~RawWebSocket() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawWebSocket::write(const void* data, size_t n) {
  return ::send(fd_, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

bool RawWebSocket::handshake() {
  const std::string request =
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  if (!write(request.data(), request.size())) return false;
  std::string response;
  char c;
  while (response.find("\r\n\r\n") == std::string::npos && ::recv(fd_, &c, 1, 0) == 1) response += c;
  return response.find(" 101 ") != std::string::npos;
}

std::vector<uint8_t> RawWebSocket::read_some(std::chrono::milliseconds wait) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
  std::vector<uint8_t> buf(4096);
  const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
  if (n <= 0) closed_ = true;
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

bool RawWebSocket::at_eof() {
  char c;
  return ::recv(fd_, &c, 1, 0) == 0;
}

std::array<uint8_t, 8> masked_binary_header(uint16_t length) {
  return {0x82, 0x80 | 126, static_cast<uint8_t>(length >> 8), static_cast<uint8_t>(length & 0xff), 1, 2,
          3,    4};
}

bool is_close_frame(const std::vector<uint8_t>& bytes) {
  return !bytes.empty() && bytes[0] == 0x88;
}

unsigned close_code_of(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4 || !is_close_frame(bytes)) return 0;
  return static_cast<unsigned>(bytes[2]) << 8 | bytes[3];
}

}  // namespace tribunal::testing
