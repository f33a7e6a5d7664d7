"""What a server that was not asked for them does not load: `cryptography` (the OCSP peer
checks, 6 MB of resident memory) and `ssl`/`urllib.request` (URL account resolvers, 7 MB with
`http` and `email`); OpenSSL's digests (`_hashlib`, 2.2 MB: natsd/digest.py has what every
server hashes), `psutil` (2.6 MB: the monitoring endpoints and STATSZ events, which a
standalone server gathers only for a listener), `cProfile` (the profiling port), `bcrypt`,
`zoneinfo` and `concurrent.futures` (the worker threads). A fresh interpreter runs natsd's
command line on a configuration until the server is ready, then reports what it imported;
with an `ocsp_peer` block it loads `cryptography`, and a `$SYS` listener to STATSZ makes it
load `psutil`, so the probe can tell."""
import subprocess
import sys

PROBE = r"""
import os, sys, threading, time
from natsd import cli
WATCH = ("cryptography", "ssl", "urllib.request", "http.client", "_hashlib", "psutil",
         "cProfile", "bcrypt", "zoneinfo", "concurrent.futures")

def report():
    time.sleep(float(sys.argv[2]))
    print(sorted(m for m in WATCH if m in sys.modules), flush=True)
    os._exit(0)
threading.Thread(target=report, daemon=True).start()
cli.main(["-c", sys.argv[1], "-p", "-1", "-a", "127.0.0.1"])
"""


def loaded(tmp_path, conf, settle=1.5):
    path = tmp_path / "probe.conf"
    path.write_text(conf)
    out = subprocess.run([sys.executable, "-c", PROBE, str(path), str(settle)], capture_output=True,
                         text=True, timeout=60)
    assert "Server is ready" in out.stderr, out.stderr
    return out.stdout.strip()


def test_a_plain_server_leaves_ocsp_and_url_resolver_modules_unloaded(tmp_path):
    assert loaded(tmp_path, "http_port: -1\nprof_port: -1\n", settle=2.5) == "[]"


def test_a_leaf_node_port_sends_statsz_and_so_loads_psutil(tmp_path):
    """(nats-server's rule: with a leaf node port, STATSZ goes out whether or not anyone
    listens here; the first after 250 ms)"""
    assert loaded(tmp_path, "leafnodes { port: -1 }\n", settle=2.5) == "['psutil']"


def test_an_ocsp_peer_block_loads_them(tmp_path):
    from tests.support.certs import CA
    ca = CA(tmp_path)
    cert, key = ca.server_cert()
    conf = ("tls { cert_file: '%s', key_file: '%s', ca_file: '%s', verify: true, ocsp_peer: false }\n"
            % (cert, key, ca.ca_file))
    assert "cryptography" in loaded(tmp_path, conf)
