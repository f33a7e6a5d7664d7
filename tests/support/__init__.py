"""The test kit every test uses, one module a concern:

- servers: natsd's and nats-server's command lines, ServerProcess, start_server, the
  monitoring port's HTTP answers;
- waiting: poll / until (a condition with a deadline, plain and async) and run (a coroutine
  with a timeout);
- natspy: nats-py as the tests use it (a flush() that follows the commands before it);
- fixtures: the shared fixtures (natsd, reference, any_server, starters, js_server, pki, the
  client probes), registered by tests/conftest.py;
- jetstream: JetStream through nats-py (connect, api, same_on_both) and where a log block's
  records end;
- rawclient: the raw protocol client (exact bytes out; reads with deadlines; requests whose
  replies are matched by reply subject);
- wsclient: the raw WebSocket client (the upgrade, masked frames, close codes);
- cluster: clusters of real servers of either kind (members, routes, JetStream clusters,
  restarts, kill -9, a slow disk);
- tcpproxy: a TCP proxy that cuts and heals a route;
- raftsim: a deterministic world (time, network, disks) for Raft nodes;
- leafnodes: a hub and a leaf of either kind, linked (the seed-000 configs);
- monitoring: $SYS requests' answers, monitoring answers compared by keys and JSON types;
- certs: a CA and the certificates it issues, the `pki` set;
- jwtmint: operators, accounts and users as nsc issues them, .creds files;
- probes: the client probes (nats.go, nats.js, nats.c) and their comparison on both servers.

Test files import what they use from here; nothing in here imports a test file.
"""
