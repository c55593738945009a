"""Options validated once, at the edge: one parser per kind of value, and typed option sets built on them.

Every method's options are a frozen dataclass deriving from :class:`Options`; each field names its parser in
its metadata (:func:`option`), and construction parses every field, so an option set that exists is valid::

    @dataclass(frozen=True)
    class MyOptions(Options):
        steps: int = option(1000, integer(minimum=1))
        schedule: Schedule = option("constant", choice(Schedule))

    MyOptions.parse("my-method", {"steps": 10})   # unknown names raise ValueError listing the accepted ones

A parser is ``parse(option_name, value) -> value``; it raises ``ValueError`` naming the option, the bad value
and what is accepted.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

E = TypeVar("E", bound=Enum)
Parser = Callable[[str, Any], Any]

# Options renamed, old name -> new name: passing the old one says what it is now called.
RENAMED = {"num_draws": "num_samples"}


def parse_option(choices: type[E], value: E | str, option: str) -> E:
    """``value`` as a member of the ``str`` enum ``choices``; raise ``ValueError`` naming ``option`` and the choices."""
    try:
        return choices(value)
    except ValueError:
        raise ValueError(f"unknown {option} {value!r}; choose from {[c.value for c in choices]}") from None


def choice(choices: type[E]) -> Parser:
    """A parser for a member of the ``str`` enum ``choices`` (the member or its string)."""
    return lambda option, value: parse_option(choices, value, option)


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(*, minimum: int | None = None, maximum: int | None = None) -> Parser:
    """A parser for an integer (a Python or NumPy integer, not a bool) in ``[minimum, maximum]``."""

    def parse(option: str, value: Any) -> int:
        if not _is_integer(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = " and ".join(part for part in (
                f">= {minimum}" if minimum is not None else "", f"<= {maximum}" if maximum is not None else "") if part)
            raise ValueError(f"{option} must be an integer{' ' + bounds if bounds else ''}, got {value!r}")
        return int(value)

    return parse


def number(*, low: float = -math.inf, high: float = math.inf, low_open: bool = True, high_open: bool = True) -> Parser:
    """A parser for a finite real number (not a bool) in the interval from ``low`` to ``high``, each end open or closed."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def parse(option: str, value: Any) -> float:
        inside = _is_real(value) and math.isfinite(value) and (low < value if low_open else low <= value) and (
            value < high if high_open else value <= high)
        if not inside:
            raise ValueError(f"{option} must be a finite number in {interval}, got {value!r}")
        return float(value)

    return parse


def flag(option: str, value: Any) -> bool:
    """``value`` if it is a real ``bool``; else ``ValueError`` naming ``option`` (a string such as ``"no"``
    is truthy, so taking it would turn the option on)."""
    if not isinstance(value, bool):
        raise ValueError(f"{option} must be True or False, got {value!r}")
    return value


def optional(parse: Parser) -> Parser:
    """``parse``, letting ``None`` through (an option whose default is decided later)."""
    return lambda option, value: None if value is None else parse(option, value)


def positive_int(option: str, value: Any) -> int:
    """``value`` if it is an integer >= 1 (not a bool); else ``ValueError`` naming ``option``."""
    if not _is_integer(value) or value < 1:
        raise ValueError(f"{option} must be a positive integer, got {value!r}")
    return int(value)


def positive_number(option: str, value: Any) -> float:
    """``value`` as a float if it is a finite number > 0 (not a bool); else ``ValueError`` naming ``option``."""
    if not _is_real(value) or not 0 < value < math.inf:
        raise ValueError(f"{option} must be a positive number, got {value!r}")
    return float(value)


def fraction(option: str, value: Any) -> float:
    """``value`` as a float if it is a number in :math:`(0, 1]` (not a bool); else ``ValueError`` naming ``option``."""
    if not _is_real(value) or not 0 < value <= 1:
        raise ValueError(f"{option} must lie in (0, 1], got {value!r}")
    return float(value)


def probability(option: str, value: Any) -> float:
    """``value`` as a float if it lies in the open interval :math:`(0, 1)`; else ``ValueError`` naming ``option``."""
    if not _is_real(value) or not 0 < value < 1:
        raise ValueError(f"{option} must be a probability in (0, 1), got {value!r}")
    return float(value)


MAX_SEED = 2**32 - 1
"""The largest seed: NumPy's generator, which Pyro seeds with torch's and Python's, takes 32 bits."""


def seed(option: str, value: Any) -> int:
    """``value`` if it is an integer (Python or NumPy, not a bool) from 0 to :data:`MAX_SEED`; else ``ValueError``
    naming ``option``."""
    if not _is_integer(value) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{option} must be a non-negative integer below 2**32, got {value!r}")
    return int(value)


def mapping(option: str, value: Any) -> dict[str, Any]:
    """``value`` as a dict if it is a mapping with string keys (``None`` is the empty dict); else ``ValueError``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"{option} must be a mapping of option names to values, like {{'init_scale': 0.01}}, "
                         f"got {value!r}")
    return dict(value)


def path(option: str, value: Any) -> Path:
    """``value`` as a :class:`~pathlib.Path` if it is a string or path; else ``ValueError`` naming ``option``."""
    if not isinstance(value, (str, PathLike)) or str(value) == "":
        raise ValueError(f"{option} must be a folder path, got {value!r}")
    return Path(value)


def json_value(value: Any) -> Any:
    """``value`` as JSON holds it: a ``str`` enum by its value, a path as text, a tensor or array as nested lists,
    mappings and sequences item by item, a class or function (a guide given as a factory) by its qualified name."""
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, (bool, str, numbers.Number)):
        return value
    if isinstance(value, PathLike):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def option(default: Any = MISSING, parse: Parser | None = None, *, default_factory: Any = MISSING,
           choices: Callable[[], list[str]] | None = None) -> Any:
    """A dataclass field of an :class:`Options` set, parsed by ``parse`` when the set is built; ``choices`` lists the
    names the command line offers for it where its type does not say (a registry's names)."""
    metadata = {"parse": parse} if choices is None else {"parse": parse, "choices": choices}
    return field(default=default, default_factory=default_factory, metadata=metadata)


@dataclass(frozen=True)
class Options:
    """A method's option set: a frozen dataclass whose fields are parsed when it is built (see the module notes)."""

    def __post_init__(self) -> None:
        for entry in fields(self):
            parse = entry.metadata.get("parse")
            if parse is not None:
                object.__setattr__(self, entry.name, parse(entry.name, getattr(self, entry.name)))
        self.check()

    def check(self) -> None:
        """Checks across options (one option that only makes sense with another); raise ``ValueError``."""

    def memory_needs(self, model) -> dict[str, int]:
        """The bytes the method holds at once for ``model`` besides the network on the data, by what holds them
        (``bnn.runtime.memory`` checks their sum against the machine before any work); none by default."""
        return {}

    def to_json(self) -> dict[str, Any]:
        """Every option by name, as JSON holds it (:func:`json_value`); building the set from it gives the same options
        where JSON holds them exactly (every option but given tensors and factories)."""
        return {entry.name: json_value(getattr(self, entry.name)) for entry in fields(self)}

    @classmethod
    def names(cls) -> list[str]:
        """The options this set takes."""
        return [entry.name for entry in fields(cls)]

    @classmethod
    def parse(cls, method: str, given: Mapping[str, Any]) -> Options:
        """The option set from the keyword options ``given``; ``ValueError`` names unknown ones and the accepted ones."""
        unknown = sorted(set(given) - set(cls.names()))
        renamed = [f"{old!r} is now {new!r} (Pyro's name)" for old, new in RENAMED.items()
                   if old in unknown and new in cls.names()]
        if renamed:
            raise ValueError(f"method {method!r}: option {', '.join(renamed)}")
        if unknown:
            raise ValueError(f"method {method!r} takes no option(s) {unknown}; it takes {sorted(cls.names())}")
        return cls(**given)
