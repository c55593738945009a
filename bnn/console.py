"""The ``bnn`` command's entry point: stop signals first, then the heavy imports, then :func:`bnn.cli.main.main`.

Importing the command line takes seconds (torch, Pyro, ArviZ). The handlers go in before that, standard library
only: Ctrl-C (SIGINT) and SIGTERM both raise ``KeyboardInterrupt`` (SIGTERM's says ``"SIGTERM"``), which the
command turns into exit status :data:`INTERRUPTED` and one line saying what was kept; during the imports nothing
was, and the line says so instead of a traceback.

A stop during the imports is also remembered, not only raised, because the raised ``KeyboardInterrupt`` lands in
whatever library code is importing, and one that catches every exception swallows it: the imports would then
finish and the command run as if nothing had happened. Hence the check after the imports. The interrupted start
ends with :func:`os._exit` (after flushing), skipping the interpreter's shutdown of half-imported modules, which
now and then ended the process by SIGINT instead of with status :data:`INTERRUPTED`; nothing is left to clean up.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

INTERRUPTED = 130
"""The exit status of an interrupted command (128 + SIGINT, the shells' convention)."""

_received: list[str] = []
"""The names of the stop signals that came, in order."""


def _interrupt(signum: int, frame) -> NoReturn:
    _received.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _interrupted_start() -> NoReturn:
    for signum in (signal.SIGINT, signal.SIGTERM):  # a second stop must not print a traceback over the line
        signal.signal(signum, signal.SIG_IGN)
    print("interrupted while starting: nothing was done", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def main() -> int:
    """Run ``bnn`` with ``sys.argv``; return its exit status (:data:`INTERRUPTED` when a stop signal ended it).

    A stop signal before the command line is imported ends the process at once with status :data:`INTERRUPTED`.
    """
    installed = [signum for signum in (signal.SIGINT, signal.SIGTERM)
                 if signal.getsignal(signum) is not signal.SIG_IGN]  # one ignored by whoever started us stays so
    for signum in installed:
        signal.signal(signum, _interrupt)
    try:
        from bnn.cli.main import main as run
    except KeyboardInterrupt:
        _interrupted_start()
    if signal.SIGINT in installed:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if _received:  # a library swallowed the KeyboardInterrupt
            raise KeyboardInterrupt(_received[0])
        return run()  # it turns a stop during a command's work into its own line and status
    except KeyboardInterrupt:
        _interrupted_start()
