"""Steps that wait for JetStream written as generators: a step yields a call (a function
that takes a `done(value, error)` callback) and gets the value back, or the error raised
where it yielded. run() drives one to its end and reports (value, error)."""
from __future__ import annotations

import logging

log = logging.getLogger("natsd")


def run(gen, done=None):
    """Drive generator `gen`; done(result, error) when it returns or raises."""
    def step(value=None, error=None):
        try:
            call = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            if done is not None:
                done(stop.value, None)
            return
        except Exception as e:                      # the step failed: its owner decides
            if done is not None:
                done(None, e)
            else:
                log.exception("MQTT step failed")
            return
        call(step)
    step()

