"""What an architecture offers the command line: its flags, each a constructor argument parsed from text, and how it
is built for a data set's shape.

An architecture in :data:`~bnn.models.network.ARCHITECTURES` that sets :attr:`BayesianNetwork.command_line
<bnn.models.network.BayesianNetwork.command_line>` to a :class:`CommandLine` is a choice of ``--model``, and each of
its :class:`Flag` s a flag of ``bnn fit`` and ``bnn compare`` (``--kernel-size`` for ``kernel_size``), with no edit to
the command line; :meth:`BayesianNetwork.for_data <bnn.models.network.BayesianNetwork.for_data>` builds it for the
data set. Two architectures may share a flag by name (the MLP's and the CNN's ``--hidden``), each with its own
default.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

NO_HIDDEN_LAYER = "none"
"""``--hidden none``: a network without hidden layers (Bayesian linear or logistic regression)."""


@dataclass(frozen=True)
class Flag:
    """One constructor argument as a command-line flag.

    Attributes
    ----------
    name : str
        The constructor argument; the flag is ``--`` and the name with ``-`` for ``_``.
    default : object
        Its value when the flag is not given.
    help : str
        What it sets, for ``--help``.
    parse : callable, optional
        ``parse(text) -> value``; ``ValueError`` with a message naming the flag for bad text (``None``: the text
        itself).
    choices : collection of str, optional
        The values it takes, when it takes a set of names (a registry stays live: names registered later count).
    """

    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] | None = None
    choices: Collection[str] | None = None

    @property
    def option(self) -> str:
        """The flag as typed: ``--kernel-size``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class CommandLine:
    """An architecture as a choice of ``--model``: a line of help, its flags, and (``without_shape``) what it does with
    a data set that has no input shape, said when it does it (``{columns}``: the data set's columns)."""

    help: str
    flags: tuple[Flag, ...]
    without_shape: str | None = None


def positive_integers(text: str, flag: str, noun: str, example: str, empty_hint: str = "") -> tuple[int, ...]:
    """Comma-separated positive integers (``noun``) for ``flag``; ``ValueError`` for an empty text or entry, a word,
    or a number below 1."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise ValueError(f"{flag} takes comma-separated {noun} like {example} with no empty one, got {text!r}"
                         f"{empty_hint}")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated {noun} like {example}, got {text!r}") from None
    if any(value < 1 for value in values):
        raise ValueError(f"{flag} {noun} must be positive, got {text!r}")
    return values


def hidden_widths(text: str) -> tuple[int, ...]:
    """``--hidden``: comma-separated positive widths, or ``none`` for no hidden layer."""
    if text.strip().lower() == NO_HIDDEN_LAYER:
        return ()
    return positive_integers(text, "--hidden", "widths", "50,50",
                             f"; write --hidden {NO_HIDDEN_LAYER} for a network without hidden layers")


def hidden_flag(default: tuple[int, ...], of_what: str) -> Flag:
    """The ``--hidden`` flag with an architecture's default (``of_what``: which layers the widths are of)."""
    return Flag("hidden", default, f"{of_what} widths, comma-separated; '{NO_HIDDEN_LAYER}' for no hidden layer",
                hidden_widths)


def integer(flag: str) -> Callable[[str], int]:
    """A parser of one integer for ``flag``."""
    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{flag} takes an integer, got {text!r}") from None
    return parse
