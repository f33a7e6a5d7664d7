"""ConfigError: every problem found in a config file, one `file:line:col: message` each."""
from __future__ import annotations


class ConfigError(Exception):
    """Raised with ALL errors found (nats-server -t style); str() is one per line."""

    def __init__(self, errors: list[str], warnings: list[str] | None = None):
        self.errors = list(errors)
        self.warnings = list(warnings or [])
        super().__init__("\n".join(self.errors))

    def __str__(self) -> str:
        return "\n".join(self.errors)
