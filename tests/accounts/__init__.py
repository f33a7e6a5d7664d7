"""Tests for accounts-level subject handling: transforms (natsd/accounts/transform.py) and account
mappings (natsd/accounts/mappings.py), including a differential test against the real nats-server."""
