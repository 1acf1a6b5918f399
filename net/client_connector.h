// Internal to net/: the client side of a connection up to its WebSocket session — resolve, address
// policy, bind to the local address, connect, TLS (wss://) and the WebSocket upgrade, after which the
// open stream goes to the session (net/stream.h). Beast stays in client_connector.cpp.
#pragma once

#include "net/client.h"

namespace tribunal {
class NetContext;
}

namespace tribunal::net_detail {

/// Resolves, connects and handshakes to `url` within `options.connect_timeout`; calls `done` exactly
/// once, on the connection's strand: with the open session (reading starts when it returns), or with
/// null and the reason. A wss:// URL needs `options.tls` set (Client::connect sees to it).
void open_connection(NetContext& ctx, const WsUrl& url, const ClientOptions& options,
                     Client::ConnectCallback done);

}  // namespace tribunal::net_detail
