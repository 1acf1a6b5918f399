#include "net/address_policy.h"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <charconv>

#include "net/error.h"

namespace tribunal {
namespace {

// The address as 16 bytes (IPv4 in the first 4) and its family; an IPv4-mapped IPv6 address as IPv4.
IpNetwork host_of(const boost::asio::ip::address& a) {
  IpNetwork n;
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return host_of(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6()));
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), n.bytes.begin());
    n.prefix = 32;
  } else {
    n.v6 = true;
    n.bytes = a.to_v6().to_bytes();
    n.prefix = 128;
  }
  return n;
}

bool contains(const IpNetwork& net, const IpNetwork& host) {
  if (net.v6 != host.v6) return false;
  for (int bit = 0; bit < net.prefix; ++bit) {
    const int byte = bit / 8, mask = 0x80 >> (bit % 8);
    if ((net.bytes[byte] & mask) != (host.bytes[byte] & mask)) return false;
  }
  return true;
}

struct Range {
  const char* cidr;
  const char* why;
};
constexpr Range kRefused[] = {
    {"0.0.0.0/8", "unspecified"},
    {"127.0.0.0/8", "loopback"},
    {"10.0.0.0/8", "private"},
    {"172.16.0.0/12", "private"},
    {"192.168.0.0/16", "private"},
    {"100.64.0.0/10", "shared address space"},
    {"169.254.0.0/16", "link-local"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved or broadcast"},
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"fc00::/7", "private"},
    {"fe80::/10", "link-local"},
    {"ff00::/8", "multicast"},
};

boost::asio::ip::address parse_address(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address(std::string(text), ec);
  if (ec) throw NetError(std::string(what) + " \"" + std::string(text) + "\": not an IP address");
  return a;
}

}  // namespace

IpNetwork parse_cidr(std::string_view text) {
  const size_t slash = text.find('/');
  IpNetwork n = host_of(parse_address(text.substr(0, slash), "network"));
  if (slash == std::string_view::npos) return n;
  const std::string_view bits = text.substr(slash + 1);
  int prefix = -1;
  const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
  const int max = n.v6 ? 128 : 32;
  if (ec != std::errc() || end != bits.data() + bits.size() || prefix < 0 || prefix > max)
    throw NetError("network \"" + std::string(text) + "\": the prefix length must be 0 to " +
                   std::to_string(max));
  n.prefix = prefix;
  return n;
}

std::string client_network(std::string_view address) {
  const IpNetwork host = host_of(parse_address(address, "address"));
  const auto& b = host.bytes;
  if (!host.v6) return fmt::format("{}.{}.{}.0/24", b[0], b[1], b[2]);
  return fmt::format("{:x}:{:x}:{:x}::/48", b[0] << 8 | b[1], b[2] << 8 | b[3], b[4] << 8 | b[5]);
}

AddressPolicy AddressPolicy::any() {
  return AddressPolicy{};
}

AddressPolicy AddressPolicy::public_only(std::vector<IpNetwork> allowed) {
  AddressPolicy p;
  p.any_ = false;
  p.allowed_ = std::move(allowed);
  return p;
}

std::string AddressPolicy::refusal(std::string_view address) const {
  const IpNetwork host = host_of(parse_address(address, "address"));
  if (any_) return "";
  for (const IpNetwork& n : allowed_)
    if (contains(n, host)) return "";
  for (const Range& r : kRefused)
    if (contains(parse_cidr(r.cidr), host)) return r.why;
  return "";
}

}  // namespace tribunal
