"""Tests for natsd.subject, natsd.permissions and natsd.auth."""
