"""``python -m tests.support.announced_run MODULE:NAME ARGS...``: the ``bnn`` command (:func:`bnn.console.main`) with ARGS,
printing ``working`` to stdout once, the first time ``NAME`` (a function or ``Class.method`` of ``MODULE``) runs;
SIGUSR1 prints every thread's stack to stderr (:data:`STACKS_SIGNAL`: a test that waited too long shows where).

The signal tests wait for that line, so that the signal reaches the command where the work happens (an SVI step, a
NUTS draw, a MAP step) rather than during its imports.
"""

from __future__ import annotations

import faulthandler
import functools
import importlib
import signal
import sys

from bnn.console import main

ANNOUNCEMENT = "working"
STACKS_SIGNAL = signal.SIGUSR1


def announce_first_call(target: str) -> None:
    """Wrap ``MODULE:NAME`` so that its first call prints :data:`ANNOUNCEMENT`."""
    module_name, _, path = target.partition(":")
    *owners, name = path.split(".")
    owner = importlib.import_module(module_name)
    for part in owners:
        owner = getattr(owner, part)
    original, announced = getattr(owner, name), []

    @functools.wraps(original)
    def announcing(*args, **kwargs):
        if not announced:
            announced.append(True)
            print(ANNOUNCEMENT, flush=True)
        return original(*args, **kwargs)

    setattr(owner, name, announcing)


if __name__ == "__main__":
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    announce_first_call(sys.argv[1])
    sys.argv = ["bnn", *sys.argv[2:]]
    sys.exit(main())
