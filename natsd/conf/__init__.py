"""The NATS configuration language: lexer, parser, and loading into Options.

Public entry points: ``load_file``, ``load_string`` and ``ConfigError``.
"""
from natsd.conf.errors import ConfigError
from natsd.conf.load import load_file, load_string
from natsd.conf.reader import parse_duration, parse_size

__all__ = ["ConfigError", "load_file", "load_string", "parse_duration", "parse_size"]
