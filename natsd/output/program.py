"""The executable's name as nats-server's outputs show it (the ports file's name, the syslog
tag)."""
import os
import sys


def program_name():
    """nats-server takes filepath.Base(os.Args[0]); `natsd` when started as `python -m natsd`."""
    name = os.path.basename((sys.argv[0] if sys.argv else "").rstrip(os.sep))
    return "natsd" if name in ("", "__main__.py", "-c") else name
