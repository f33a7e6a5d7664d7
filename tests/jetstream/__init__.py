"""Tests for JetStream: stores (and later streams, consumers, API)."""
