"""`python -m natsd`: the same as the `natsd` command."""
from natsd.cli import run

run()
