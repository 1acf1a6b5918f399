// Which addresses a client may connect to. A referee connects to endpoints that providers signed, so a
// peer chooses them: without a policy it could make the referee connect to services on the referee's
// own machine or network (server-side request forgery). The policy is applied to every address a
// name resolves to, so a DNS name that points at an internal address is refused as well.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tribunal {

/// An IP network (address and prefix length), IPv4 or IPv6.
struct IpNetwork {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  ///< network-order bytes (IPv4 in the first 4)
  int prefix = 0;                   ///< 0..32 (IPv4) or 0..128 (IPv6)
};

/// Parses "ADDRESS/PREFIX" or a bare address (one host: /32 or /128). Throws NetError quoting the
/// text and saying what is wrong.
IpNetwork parse_cidr(std::string_view text);

/// The network a client address belongs to for admission limits: its /24 ("203.0.113.0/24") for
/// IPv4 (an IPv4-mapped IPv6 address counts as IPv4), its /48 ("2001:db8:1::/48") for IPv6 — the
/// blocks one site is usually given (RFC 6177), so one party with many addresses of its network
/// counts once. Throws NetError when `address` is not an IP address.
std::string client_network(std::string_view address);

/// The addresses a client may connect to. `any()` allows every address (clients that connect to
/// URLs their own operator typed). Otherwise only public unicast addresses are allowed, and these
/// are refused unless they lie in an `allowed` network: unspecified (0.0.0.0/8, ::), loopback
/// (127.0.0.0/8, ::1), private (RFC 1918: 10/8, 172.16/12, 192.168/16; RFC 4193: fc00::/7),
/// shared address space (RFC 6598: 100.64/10), link-local (RFC 3927: 169.254/16; RFC 4291:
/// fe80::/10), multicast (224/4, ff00::/8), reserved and broadcast (240/4). An IPv4-mapped IPv6
/// address (::ffff:a.b.c.d) is judged as the IPv4 address.
class AddressPolicy {
 public:
  static AddressPolicy any();
  /// Public addresses plus `allowed` networks.
  static AddressPolicy public_only(std::vector<IpNetwork> allowed = {});

  /// Why a literal address ("127.0.0.1", "::1") is refused ("loopback", …), or "" when allowed.
  /// Throws NetError when `address` is not an IP address.
  std::string refusal(std::string_view address) const;
  bool allows(std::string_view address) const { return refusal(address).empty(); }
  bool allows_any() const { return any_; }

 private:
  bool any_ = true;
  std::vector<IpNetwork> allowed_;
};

}  // namespace tribunal
