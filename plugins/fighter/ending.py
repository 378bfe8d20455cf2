"""How the run is ending, as far as a closing env can tell: what the game page says at the end.

The run closes its training envs on every way out (framework.run): after its training ran to the
end, after a Ctrl-C or SIGTERM, after an error. The env sees which from the exception on its way
through the close (SIGTERM and a second Ctrl-C raise KeyboardInterrupt) and, given the run's stop
flag (`Fighter.watch_run`), from that flag: a first Ctrl-C or a sweep's pruner sets it and
lets the training loop return normally.
"""

from __future__ import annotations

import sys
import threading


def run_ending(stop: threading.Event | None) -> str:
    """One of protocol.ENDINGS for an env closing now; call it from the close itself, where the
    exception that ends the run (if any) is still being handled."""
    error = sys.exc_info()[1]
    if isinstance(error, KeyboardInterrupt):
        return "stopped"
    if error is not None:
        return "failed"
    if stop is None:  # training returned: it finished, or a first Ctrl-C stopped it; unknown here
        return "ended"
    return "stopped" if stop.is_set() else "finished"
