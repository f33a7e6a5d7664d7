"""The network under every connection kind: listening, dialing, TLS, compression, WebSocket.

- listener.py     listening sockets on the loop, `host:port` text as nats-server prints it,
                  INFO nonces, the client URLs a listener is reached at
- dialer.py       outbound TCP connects on the loop (routes, leaf remotes)
- tls.py          `tls {}` blocks turned into OpenSSL contexts (natsd/_core/tls.pyx does the
                  bytes), certificate identities, Go's TLS names
- compression.py  S2 on routes and leaf links: the modes and how two servers agree on one
- websocket.py    the `websocket {}` listener and its HTTP upgrade (frames: natsd/_core/ws.pyx)
- proxyproto.py   the PROXY protocol header before a client's first byte (`proxy_protocol`)

The connection kinds built on these: clients (natsd/client.py), routes (natsd/cluster/) and
leaf nodes (natsd/leafnodes/).
"""
