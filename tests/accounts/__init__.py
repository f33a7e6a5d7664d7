"""Tests for accounts-level subject handling: transforms (natsd/transform.py) and account
mappings (natsd/mappings.py), including a differential test against the real nats-server."""
