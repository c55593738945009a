"""The ``bnn`` command's entry point: stop signals first, then the heavy imports, then :func:`bnn.cli.main.main`.

Importing the command line takes seconds (torch, Pyro, ArviZ). The handlers go in before that, standard library
only. During the imports nothing has been done, so Ctrl-C (SIGINT) or SIGTERM ends the process from the handler
itself: one line saying so, exit status :data:`INTERRUPTED`, through :func:`os._exit` (after flushing). Nothing is
raised into the library code being imported: a ``KeyboardInterrupt`` raised there could be swallowed by a library
that catches every exception (the command would then run as if nothing had happened), or break a C extension's
initialisation (matplotlib's ``ft2font``: "ImportError: initialization failed", then a fatal error as the
interpreter shut down). Once the command line is imported, both signals raise ``KeyboardInterrupt`` (SIGTERM's says
``"SIGTERM"``), which the command turns into exit status :data:`INTERRUPTED` and one line saying what was kept.
"""
from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

INTERRUPTED = 130
"""The exit status of an interrupted command (128 + SIGINT, the shells' convention)."""

def _interrupt(signum: int, frame) -> NoReturn:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _interrupted_start(signum: int | None = None, frame=None) -> NoReturn:
    """End the process: a stop signal came before the command began its work (also the handler during the imports)."""
    for stop in (signal.SIGINT, signal.SIGTERM):  # a second stop must not print a traceback over the line
        signal.signal(stop, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, RuntimeError, ValueError):  # closed, or the handler came while this thread was writing to it
            pass
    os.write(2, b"interrupted while starting: nothing was done\n")  # not through sys.stderr's buffer: see above
    os._exit(INTERRUPTED)


def main() -> int:
    """Run ``bnn`` with ``sys.argv``; return its exit status (:data:`INTERRUPTED` when a stop signal ended it).

    A stop signal before the command line is imported ends the process at once with status :data:`INTERRUPTED`.
    """
    installed = [signum for signum in (signal.SIGINT, signal.SIGTERM)
                 if signal.getsignal(signum) is not signal.SIG_IGN]  # one ignored by whoever started us stays so
    for signum in installed:
        signal.signal(signum, _interrupted_start)
    from bnn.cli.main import main as run

    if signal.SIGINT in installed:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.SIGTERM in installed:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run()  # it turns a stop during a command's work into its own line and status
    except KeyboardInterrupt:
        _interrupted_start()
