"""The NATS configuration language: lexer, parser, and loading into Options.

Public entry points: ``load_file``, ``load_string`` and ``ConfigError``.
"""
from .errors import ConfigError
from .load import load_file, load_string
from .reader import parse_duration, parse_size

__all__ = ["ConfigError", "load_file", "load_string", "parse_duration", "parse_size"]
