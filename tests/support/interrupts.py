"""Ctrl-C and signals delivered in this process at a chosen point of a fit: an SVI step, a NUTS progress report, the
start of a method's fit."""

from __future__ import annotations

import itertools
import signal

from bnn.inference.nuts import chains
from bnn.inference.svi import loop as svi_loop


def signal_at_step(monkeypatch, call: int, signum: int = signal.SIGINT) -> None:
    """Deliver ``signum`` to this process during the ``call``-th SVI step."""
    calls = itertools.count(1)
    step = svi_loop.guarded_step

    def signalling_step(*args, **kwargs):
        if next(calls) == call:
            signal.raise_signal(signum)
        return step(*args, **kwargs)

    monkeypatch.setattr(svi_loop, "guarded_step", signalling_step)


def interrupt_at_report(monkeypatch, report: int, when=lambda: True, stage: str | None = None) -> list[str]:
    """Ctrl-C (SIGINT, delivered to this process) at the ``report``-th call of the progress callback or, if
    ``when()`` is false then (or the report is not of ``stage``, "Warmup" or "Sample", when given), at the first
    call after that where it is true; once. The returned list says ``"sent"``, then ``"the report was shown"`` if
    the callback went on after it (chains in processes act on it at their next poll; in this process it is raised
    at once)."""
    calls, show, events = itertools.count(1), chains._ProgressBars.__call__, []

    def interrupting(self, message):
        if not events and next(calls) >= report and when() and stage in (None, message[1]):
            events.append("sent")
            signal.raise_signal(signal.SIGINT)
            show(self, message)
            events.append("the report was shown")
            return
        show(self, message)

    monkeypatch.setattr(chains._ProgressBars, "__call__", interrupting)
    return events


def interrupt_fit_of(monkeypatch, module, method: str) -> None:
    """Ctrl-C (``KeyboardInterrupt``) when ``module``'s ``fit`` is called for ``method``; other methods fit as before."""
    original = module.fit

    def fit(model, data, name, **options):
        if name == method:
            raise KeyboardInterrupt
        return original(model, data, name, **options)

    monkeypatch.setattr(module, "fit", fit)
