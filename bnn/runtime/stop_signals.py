"""Stop signals deferred to a safe point: Ctrl-C (SIGINT) and SIGTERM end a loop between two steps.

A signal that arrives in the middle of an optimiser step would leave half of the parameters
updated; while :func:`deferred_stop_signals` is active the signal is only recorded, the loop
asks :attr:`StopRequest.signal` after each step, saves its state and calls
:meth:`StopRequest.stop`. Handlers can be installed in the main thread only (Python delivers
signals there); elsewhere, and for a signal the process ignores, nothing changes. The previous
handlers come back when the block ends, and a signal recorded but not acted on is raised
again under them, so none is lost.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from typing import NoReturn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_SECONDS = 0.2
"""How long a loop that waits on worker processes waits at a time before it looks for a recorded stop signal."""


class StopRequest:
    """The first stop signal received while :func:`deferred_stop_signals` is active."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.handled = False

    def __call__(self, signum: int, frame) -> None:
        if self.signal is None:
            self.signal = signum

    def stop(self, message: str) -> NoReturn:
        """End the loop with ``KeyboardInterrupt(message)``, for SIGINT and SIGTERM alike (the message names the
        signal; the command line exits with status 130; ``finally`` blocks and context managers still clean up)."""
        self.handled = True
        raise KeyboardInterrupt(message)

    def interrupt(self) -> KeyboardInterrupt:
        """The exception the recorded signal would have raised, for a loop that keeps it rather than raising it:
        ``KeyboardInterrupt()`` for SIGINT, ``KeyboardInterrupt("SIGTERM")`` for SIGTERM (as
        :func:`sigterm_as_keyboard_interrupt` raises). The request counts as handled."""
        self.handled = True
        return KeyboardInterrupt() if self.signal == signal.SIGINT else KeyboardInterrupt(signal.Signals(self.signal).name)


@contextmanager
def deferred_stop_signals(enabled: bool = True) -> Iterator[StopRequest]:
    """Within the block, SIGINT and SIGTERM set the yielded :class:`StopRequest` instead of acting.

    With ``enabled`` false, or outside the main thread, no handler is installed and the request
    stays empty.
    """
    request = StopRequest()
    previous = {}
    if enabled and threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if handler not in (signal.SIG_IGN, None):  # None: a handler installed outside Python, not restorable
                previous[signum] = signal.signal(signum, request)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if request.signal is not None and not request.handled:
            signal.raise_signal(request.signal)


@contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt("SIGTERM")`` where Ctrl-C would raise ``KeyboardInterrupt``.

    For loops that already stop cleanly on Ctrl-C and keep what they made (NUTS keeps its draws):
    a scheduler's or ``kill``'s SIGTERM then ends them the same way instead of killing the
    process. Main thread only; a SIGTERM the process ignores stays ignored. After the first SIGTERM,
    further ones are ignored until the block ends (schedulers repeat theirs), so that a second one cannot cut
    short the clean-up that keeps the finished work; the previous handler comes back when the block ends.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) in (signal.SIG_IGN, None):
        yield
        return

    def interrupt(signum: int, frame) -> NoReturn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def first_finished(pending: set[Future]) -> tuple[set[Future], set[Future]]:
    """The futures of ``pending`` that are done after one wait of at most :data:`POLL_SECONDS` (the wait ends at the
    first to finish), and the rest: the wait of a loop that acts on a :class:`StopRequest` between two such waits,
    so that no signal is raised inside ``concurrent.futures`` while it holds a future's lock that loky's own thread
    needs (the shut-down would then wait forever)."""
    return wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
