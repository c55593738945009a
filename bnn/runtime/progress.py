"""Progress bars, one policy for the whole package: every bar is made by :func:`progress_bar`.

- A terminal (or a notebook) gets tqdm's live bar.
- Anything else (a log file, a pipe, a batch job) gets a few plain lines: one when the bar starts, one at each tenth
  of the way (or each stage of a :func:`stages` bar), one at the end; no carriage returns, no control codes.
- ``BNN_PROGRESS=0`` (or ``off``, ``false``, ``no``) in the environment, or :func:`set_progress` ``(False)``, silences
  every bar; a fit's own ``progress=False`` (``--quiet``) silences its bars.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm as terminal_tqdm
from tqdm.auto import tqdm as auto_tqdm
from tqdm.autonotebook import tqdm as notebook_or_terminal_tqdm

ENVIRONMENT_VARIABLE = "BNN_PROGRESS"
SWITCH = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}
"""The values ``BNN_PROGRESS`` takes (any case); unset means on."""
_chosen: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """Show (``True``) or silence (``False``) every progress bar of the package; ``None`` goes back to what
    ``BNN_PROGRESS`` says."""
    global _chosen
    if enabled not in (True, False, None):
        raise ValueError(f"set_progress takes True, False or None, got {enabled!r}")
    _chosen = enabled


def progress_enabled() -> bool:
    """Whether bars show at all: :func:`set_progress`'s choice, else ``BNN_PROGRESS`` (default on).

    Raises
    ------
    ValueError
        For a ``BNN_PROGRESS`` value that is not one of :data:`SWITCH`.
    """
    if _chosen is not None:
        return _chosen
    value = os.environ.get(ENVIRONMENT_VARIABLE, "1").strip().lower()
    if value not in SWITCH:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}={value!r} is not understood; set it to 0/off to silence the progress "
                         "bars or 1/on to show them")
    return SWITCH[value]


class _Discard:
    """A stream that drops what tqdm writes, for :class:`PlainLinesBar`, which writes its own lines."""

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class PlainLinesBar(terminal_tqdm):
    """A tqdm bar for a stream that is not a terminal: one plain line when it starts, at each tenth of ``total``, at
    each new description and at the end (``desc: n/total (pct%), elapsed, postfix``)."""

    def __init__(self, *args: Any, file=None, **kwargs: Any) -> None:
        self.lines = sys.stderr if file is None else file
        self.tenths_shown, self.n_shown, self.desc_shown = -1, None, None
        super().__init__(*args, file=_Discard(), mininterval=0, miniters=1, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        tenth = min(10, int(10 * self.n / self.total)) if self.total else 0
        if tenth > self.tenths_shown or self.desc != self.desc_shown:
            self.tenths_shown = max(tenth, self.tenths_shown)
            self.write_line()
        return True

    def write_line(self) -> None:
        """Print the bar's state as one plain line."""
        self.n_shown, self.desc_shown = self.n, self.desc
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        elapsed = self.format_interval(self.format_dict["elapsed"])
        postfix = f", {self.postfix}" if self.postfix else ""
        print(f"{self.desc or 'progress'}: {self.n}/{self.total or '?'}{share}, {elapsed}{postfix}", file=self.lines,
              flush=True)

    def close(self) -> None:
        if not self.disable and self.n != self.n_shown:
            self.write_line()
        super().close()


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **options: Any) -> terminal_tqdm:
    """A tqdm bar over ``iterable`` (or one moved by ``update``) under the package's policy (module docstring).

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over.
    enabled : bool
        The caller's own switch (a fit's ``progress``); the bar shows only when this and :func:`progress_enabled`
        say so.
    **options
        tqdm's options (``total``, ``desc``, ``unit``, ``leave``, ``position``, ...).
    """
    if not (enabled and progress_enabled()):
        return terminal_tqdm(iterable, disable=True, **options)
    if notebook_or_terminal_tqdm is not terminal_tqdm or sys.stderr.isatty():  # a notebook's widget, or a terminal
        return auto_tqdm(iterable, **options)
    return PlainLinesBar(iterable, **options)


@contextmanager
def stages(total: int, *, desc: str, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A bar over ``total`` named stages: the yielded ``start(name)`` ends the stage before and shows ``name``.

    Each stage is one plain line off a terminal, so a long stage shows what it is while it runs.
    """
    with progress_bar(total=total, desc=desc, unit="stage", leave=False, enabled=enabled) as bar:
        started = []

        def start(name: str) -> None:
            bar.set_description_str(f"{desc}: {name}", refresh=not started)
            if started:
                bar.update(1)
            started.append(name)

        yield start
        if started:
            bar.update(1)
