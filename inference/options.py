"""Validating options at the edge: closed option sets (``str`` enums), positive numbers, fractions and flags."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, TypeVar

E = TypeVar("E", bound=Enum)


def parse_option(choices: type[E], value: E | str, option: str) -> E:
    """``value`` as a member of ``choices``; raise ``ValueError`` naming ``option`` and the choices."""
    try:
        return choices(value)
    except ValueError:
        raise ValueError(f"unknown {option} {value!r}; choose from {[c.value for c in choices]}") from None


def positive_int(option: str, value: Any) -> int:
    """``value`` if it is an integer >= 1 (not a bool); else ``ValueError`` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{option} must be a positive integer, got {value!r}")
    return value


def positive_number(option: str, value: Any) -> float:
    """``value`` as a float if it is a finite number > 0 (not a bool); else ``ValueError`` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{option} must be a positive number, got {value!r}")
    return float(value)


def flag(option: str, value: Any) -> bool:
    """``value`` if it is a real ``bool``; else ``ValueError`` naming ``option`` (a string such as ``"no"``
    is truthy, so taking it would turn the option on)."""
    if not isinstance(value, bool):
        raise ValueError(f"{option} must be True or False, got {value!r}")
    return value


def fraction(option: str, value: Any) -> float:
    """``value`` as a float if it is a number in :math:`(0, 1]` (not a bool); else ``ValueError`` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{option} must lie in (0, 1], got {value!r}")
    return float(value)
