"""Tests for natsd.subject, natsd.auth.permissions and natsd.auth.authenticator."""
