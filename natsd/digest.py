"""SHA-256, SHA-1 and the constant-time comparison from CPython's own implementations, for what every server computes at
start (the server's hash names, the config digest, WebSocket handshakes): `hashlib` would load
OpenSSL's digest providers, 2.2 MB resident at an idle start. Hashes of TLS material, JWT
ids (sha512/256) and encryption keys still come from hashlib where they are used."""
try:                                    # CPython 3.12 on
    from _sha2 import sha256            # noqa: F401
except ImportError:                     # CPython 3.11
    try:
        from _sha256 import sha256      # noqa: F401
    except ImportError:                 # another Python: its hashlib
        from hashlib import sha256      # noqa: F401
try:
    from _sha1 import sha1              # noqa: F401
except ImportError:
    from hashlib import sha1            # noqa: F401
try:                                    # hmac's, which it takes from OpenSSL when it can
    from _operator import _compare_digest as compare_digest     # noqa: F401
except ImportError:
    from hmac import compare_digest     # noqa: F401
