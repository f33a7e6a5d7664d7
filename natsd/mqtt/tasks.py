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


def gather(calls):
    """A call that makes several calls at once and answers with their (value, error) pairs,
    in order."""
    def call(done):
        results = [None] * len(calls)
        left = [len(calls)]
        if not calls:
            done([], None)
            return

        def one(i):
            def finished(value, error):
                results[i] = (value, error)
                left[0] -= 1
                if left[0] == 0:
                    done(results, None)
            return finished
        for i, c in enumerate(calls):
            c(one(i))
    return call
