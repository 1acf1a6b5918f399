// How a session's end becomes its CloseInfo (net/close_info.h), case by case, without sockets.
#include <doctest/doctest.h>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

#include "net/close_info.h"

using namespace tribunal;
using namespace tribunal::net_detail;
namespace websocket = boost::beast::websocket;

TEST_CASE("close_info: our close reports our code and reason; a timeout or transport error is named") {
  SessionEnd end;
  end.read_error = websocket::error::closed;
  end.closed_by_us = true;
  end.our_code = CloseCode::GoingAway;
  end.our_reason = "shutting down";
  CloseInfo info = close_info(end);
  CHECK(info.code == CloseCode::GoingAway);
  CHECK(info.reason == "shutting down");
  CHECK_FALSE(info.by_peer);
  CHECK(info.error.empty());
  CHECK(to_string(info) == "1001 (shutting down) by us");

  end.read_error = boost::asio::error::connection_reset;
  CHECK(close_info(end).error == boost::system::error_code(boost::asio::error::connection_reset).message());
  end.close_timed_out = true;
  CHECK(close_info(end).error == "close handshake timed out");
}

TEST_CASE("close_info: the peer's close frame, with or without a code, also when a write failed after it") {
  SessionEnd end;
  end.read_error = websocket::error::closed;
  end.peer_reason = websocket::close_reason(websocket::close_code::policy_error, "queue full");
  CloseInfo info = close_info(end);
  CHECK(info.code == CloseCode::PolicyViolation);
  CHECK(info.reason == "queue full");
  CHECK(info.by_peer);
  CHECK(info.error.empty());

  end.peer_reason = websocket::close_reason();  // a close frame without a code
  CHECK(close_info(end).code == kCloseNoStatus);
  CHECK(close_info(end).by_peer);

  end.read_error = boost::asio::error::broken_pipe;  // the frame was parsed before the write failed
  end.peer_reason = websocket::close_reason(websocket::close_code::too_big);
  info = close_info(end);
  CHECK(info.code == CloseCode::TooBig);
  CHECK(info.by_peer);
  CHECK_FALSE(info.error.empty());
}

TEST_CASE("close_info: Beast's own failures: 1009 names the limit, 1002 a protocol error, else 1006") {
  SessionEnd end;
  end.read_error = websocket::error::message_too_big;
  end.max_message_bytes = 4096;
  CloseInfo info = close_info(end);
  CHECK(info.code == CloseCode::TooBig);
  CHECK(info.reason == "message too big");
  CHECK(info.error == "message over 4096 bytes");
  CHECK(to_string(info) == "1009 (message too big) by us: message over 4096 bytes");

  end.read_error = websocket::error::bad_opcode;
  CHECK(close_info(end).code == CloseCode::ProtocolError);

  end.read_error = boost::beast::error::timeout;
  info = close_info(end);
  CHECK(info.code == kCloseAbnormal);
  CHECK(info.error == "timed out (peer silent)");
  CHECK(to_string(info) == "1006: timed out (peer silent)");

  end.read_error = boost::asio::error::eof;
  CHECK(close_info(end).code == kCloseAbnormal);
}

TEST_CASE("is_sendable: report-only and reserved codes may not be sent") {
  for (unsigned c : {1000u, 1001u, 1002u, 1003u, 1007u, 1008u, 1009u, 1011u, 1014u, 3000u, 4999u})
    CHECK(is_sendable(static_cast<CloseCode>(c)));
  for (unsigned c : {999u, 1004u, 1005u, 1006u, 1015u, 1016u, 2999u, 5000u})
    CHECK_FALSE(is_sendable(static_cast<CloseCode>(c)));
}
