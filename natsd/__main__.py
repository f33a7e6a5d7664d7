"""`python -m natsd`: the same as the `natsd` command."""
import sys

from natsd.cli import main

sys.exit(main())
