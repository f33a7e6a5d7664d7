"""Monitoring: nats-server's HTTP(S) endpoints, and the same data for `$SYS.REQ.*` requests.

- http.py          the listener (h11 on the server's own loop), HTTPS, the index page
- endpoints.py     the table of endpoints, shared by HTTP and the system account's requests
- params.py        query and request options, decoded and checked as nats-server does
- varz.py, connz.py, routez.py (and /gatewayz), leafz.py, subsz.py, accountz.py (and
  /accstatz), jsz.py, healthz.py, raftz.py, ipqueuesz.py, expvarz.py, profilez.py,
  stacksz.py   one module per endpoint, with nats-server's field names
- sysexports.py    the system account's services every account sees in /accountz
- metrics.py       /metrics, the same figures in Prometheus's text format (natsd only)
"""
