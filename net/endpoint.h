// Internal to net/: how log lines and Session::remote_endpoint name a TCP peer.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <string>

namespace tribunal::net_detail {

/// "address:port", IPv6 as "[address]:port".
inline std::string endpoint_string(const boost::asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace tribunal::net_detail
