"""Stop signals wait for the loop's safe point, end it with the right exception, and are never lost."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import Future

import pytest

from bnn.runtime.stop_signals import POLL_SECONDS, deferred_stop_signals, first_finished, sigterm_as_keyboard_interrupt


def handlers() -> dict[int, object]:
    return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_recorded_until_the_loop_stops_on_it(signum):
    before = handlers()
    with pytest.raises(KeyboardInterrupt, match="saved; resume from here"):
        with deferred_stop_signals() as request:
            signal.raise_signal(signum)
            assert request.signal == signum  # recorded; nothing raised yet
            request.stop("saved; resume from here")
    assert handlers() == before


@pytest.mark.parametrize("signum, message", [(signal.SIGINT, ""), (signal.SIGTERM, "SIGTERM")])
def test_a_loop_that_keeps_the_signal_gets_the_exception_it_stands_for_and_nothing_is_raised_again(signum, message):
    with deferred_stop_signals() as request:
        signal.raise_signal(signum)
        signal.raise_signal(signum)  # a second one, as schedulers send, changes nothing
        kept = request.interrupt()
    assert type(kept) is KeyboardInterrupt and str(kept) == message


def test_a_signal_the_loop_did_not_act_on_is_raised_again_under_the_previous_handler():
    with pytest.raises(KeyboardInterrupt):
        with deferred_stop_signals():
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nothing_is_installed_when_disabled_or_outside_the_main_thread():
    before, seen = handlers(), []
    with deferred_stop_signals(enabled=False) as request:
        seen.append(handlers())

    def in_a_thread():
        with deferred_stop_signals():
            seen.append(handlers())

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [before, before] and request.signal is None


def test_sigterm_becomes_a_keyboard_interrupt_within_the_block_only(monkeypatch):
    before = handlers()
    with sigterm_as_keyboard_interrupt():
        assert signal.getsignal(signal.SIGTERM) not in (before[signal.SIGTERM], signal.SIG_IGN)
    assert handlers() == before
    cleaned = []
    with pytest.raises(KeyboardInterrupt, match="^SIGTERM$"):
        with sigterm_as_keyboard_interrupt():
            try:
                signal.raise_signal(signal.SIGTERM)
            finally:
                signal.raise_signal(signal.SIGTERM)  # a scheduler's second SIGTERM, during the clean-up
                cleaned.append(True)
    assert cleaned == [True]  # the clean-up ran to its end
    assert handlers() == before  # a library call leaves the caller's handler as it found it
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_IGN)  # a process that ignores SIGTERM
    with sigterm_as_keyboard_interrupt():
        assert signal.signal(signal.SIGTERM, before[signal.SIGTERM]) == before[signal.SIGTERM]  # nothing installed


def test_one_wait_returns_at_the_first_finished_future_or_after_the_poll_time():
    running, finished = Future(), Future()
    finished.set_result(1)
    began = time.perf_counter()
    assert first_finished({running, finished}) == ({finished}, {running})
    assert time.perf_counter() - began < POLL_SECONDS
    threading.Timer(POLL_SECONDS / 4, running.set_result, (2,)).start()
    assert first_finished({running}) == ({running}, set())
    waiting = Future()
    began = time.perf_counter()
    assert first_finished({waiting}) == (set(), {waiting})
    assert time.perf_counter() - began >= POLL_SECONDS * 0.9
