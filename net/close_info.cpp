#include "net/close_info.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

namespace tribunal {

std::string to_string(const CloseInfo& info) {
  std::string s = std::to_string(static_cast<unsigned>(info.code));
  if (!info.reason.empty()) s += " (" + info.reason + ")";
  if (info.code != kCloseAbnormal) s += info.by_peer ? " by peer" : " by us";
  if (!info.error.empty()) s += ": " + info.error;
  return s;
}

namespace net_detail {

namespace websocket = boost::beast::websocket;

bool is_sendable(CloseCode code) {
  const auto c = static_cast<unsigned>(code);
  return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

CloseInfo close_info(const SessionEnd& end) {
  CloseInfo info;
  const auto& ec = end.read_error;
  const bool clean = ec == websocket::error::closed || ec == boost::asio::error::operation_aborted;
  if (end.closed_by_us) {
    info.code = end.our_code;
    info.reason = end.our_reason;
    if (end.close_timed_out) {
      info.error = "close handshake timed out";
    } else if (!clean) {
      info.error = ec.message();
    }
  } else if (ec == websocket::error::closed || end.peer_reason.code != websocket::close_code::none) {
    // The peer's close frame was parsed — even when a failed write ended the read afterwards
    // (a peer refusing our message may reset the connection while we are still writing it).
    const auto code = end.peer_reason.code;
    info.code = code == websocket::close_code::none ? kCloseNoStatus : static_cast<CloseCode>(code);
    info.reason = std::string(end.peer_reason.reason.data(), end.peer_reason.reason.size());
    info.by_peer = true;
    if (ec != websocket::error::closed) info.error = ec.message();
  } else if (ec == websocket::error::message_too_big) {
    info.code = CloseCode::TooBig;  // Beast has sent the 1009 close frame
    info.reason = "message too big";
    info.error = "message over " + std::to_string(end.max_message_bytes) + " bytes";
  } else if (ec.category() == websocket::make_error_code(websocket::error::closed).category()) {
    info.code = CloseCode::ProtocolError;  // Beast failed the connection with 1002
    info.error = ec.message();
  } else {
    info.code = kCloseAbnormal;
    info.error = ec == boost::beast::error::timeout ? "timed out (peer silent)" : ec.message();
  }
  return info;
}

}  // namespace net_detail
}  // namespace tribunal
