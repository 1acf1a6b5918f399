// Internal to net/: how a session's end becomes the CloseInfo its on_close handler and log line get
// (RFC 6455 §7.4 codes), apart from the session's I/O so that each case can be tested alone.
#pragma once

#include <boost/beast/websocket/error.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cstddef>
#include <string>

#include "net/session.h"

namespace tribunal::net_detail {

/// What a session knows when both its read loop and its close handshake are over.
struct SessionEnd {
  boost::system::error_code
      read_error;  ///< what ended the read loop (websocket::error::closed: a clean close)
  /// The peer's close frame as parsed (code `none`: none came, or it carried no code).
  boost::beast::websocket::close_reason peer_reason;
  bool closed_by_us = false;  ///< we sent the first close frame
  CloseCode our_code = CloseCode::Normal;
  std::string our_reason;
  bool close_timed_out = false;  ///< our close handshake ran past SessionOptions::close_timeout
  size_t max_message_bytes = 0;  ///< the limit a 1009 names
};

/// The CloseInfo of a session's end: our close (code and reason as sent), else the peer's close frame
/// (1005 when it carried no code), else Beast's own failure (1009 for an oversized message, 1002 for a
/// protocol error), else 1006 with the transport error.
CloseInfo close_info(const SessionEnd& end);

/// RFC 6455 §7.4: whether an endpoint may put `code` in a close frame (1005, 1006, 1015 are
/// report-only; 1004 and 1016–2999 are reserved).
bool is_sendable(CloseCode code);

}  // namespace tribunal::net_detail
