"""The suite's configuration: hypothesis's fixed-seed profile, nats-py's flush() made to follow
what was sent before it (tests/support/natspy.py), and the shared fixtures of the test kit
(tests/support/fixtures.py: servers of both kinds, certificates, client probes) registered for
every directory."""
import os

from hypothesis import settings as hypothesis_settings

from tests.support import natspy

pytest_plugins = ["tests.support.fixtures"]

natspy.order_flush()

# Hypothesis draws each test's examples from a fixed seed, so a run of the suite is repeatable
# (a failure found once is found again); NATSD_HYPOTHESIS_RANDOM=1 explores fresh examples.
hypothesis_settings.register_profile("natsd", database=None,
                                     derandomize=not os.environ.get("NATSD_HYPOTHESIS_RANDOM"))
hypothesis_settings.load_profile("natsd")
