"""The ``bnn`` command's entry point: stop signals first, then the heavy imports, then :func:`bnn.cli.main.main`.

Importing the command line takes seconds (torch, Pyro, ArviZ). The handlers go in before that, standard library
only: Ctrl-C (SIGINT) and SIGTERM both raise ``KeyboardInterrupt`` (SIGTERM's says ``"SIGTERM"``), which the
command turns into exit status :data:`INTERRUPTED` and one line saying what was kept; during the imports nothing
was, and the line says so instead of a traceback.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

INTERRUPTED = 130
"""The exit status of an interrupted command (128 + SIGINT, the shells' convention)."""


def _interrupt(signum: int, frame) -> NoReturn:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    """Run ``bnn`` with ``sys.argv``; return its exit status (:data:`INTERRUPTED` when a stop signal ended it)."""
    for signum, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _interrupt)):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # a signal ignored by whoever started us stays ignored
            signal.signal(signum, handler)
    try:
        from bnn.cli.main import main as run

        return run()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not print a traceback over the line
        print("interrupted while starting: nothing was done", file=sys.stderr)
        return INTERRUPTED
