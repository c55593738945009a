r"""The methods' flags, made from their option sets: every field of a registered method's
:class:`~bnn.options.Options` is a flag (``map_steps`` is ``--map-steps``), so a new option is a flag with no edit here.

A flag's type comes from the field's annotation (a ``bool`` is ``--x/--no-x``, a ``str`` enum offers its values, an
option with a ``choices`` callable in its metadata offers those), its help from the field's entry in the option set's
numpydoc ``Attributes`` (first sentence, roles stripped), its default from every method that takes it. Every flag
defaults to ``None`` and is forwarded only when given, so each method keeps its own default, and a method refuses,
by name, an option it does not take. The options the command sets itself (:data:`SET_BY_THE_COMMAND`) have no flag
here.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Any

from bnn.inference.fit import METHODS

SET_BY_THE_COMMAND = frozenset({"seed", "progress", "guide_options", "checkpoint_dir", "checkpoint_every", "resume"})
"""Options the command line sets from its own arguments: ``--seed``, ``--quiet``, ``--guide-option KEY=VALUE``, and
the checkpoints of ``bnn fit``."""
ROLE = re.compile(r":([a-z]+):`~?([^`]*)`")
NAMING_ROLES = frozenset({"class", "func", "mod", "meth", "attr", "data", "obj"})
SECTION = re.compile(r"^\s*Attributes\n\s*-+\n", re.M)


@functools.cache
def documented_fields(options: type) -> dict[str, str]:
    """Each field named in the numpydoc ``Attributes`` sections of ``options`` and its bases (the class's own entry
    first), with its description on one line."""
    found: dict[str, str] = {}
    for cls in options.__mro__:
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
        match = SECTION.search(doc + "\n")
        if match is None:
            continue
        names, lines = [], []
        for line in (doc + "\n")[match.end():].splitlines() + [""]:
            if line and not line.startswith(" "):  # a header: "name[, name] [: type]"
                for name in names:
                    found.setdefault(name, " ".join(lines))
                names, lines = [n.strip() for n in line.split(":")[0].split(",")], []
            elif line.strip():
                lines.append(line.strip())
            elif names and lines:
                for name in names:
                    found.setdefault(name, " ".join(lines))
                names, lines = [], []
    return found


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` with Sphinx roles and literals as plain text."""
    plain = ROLE.sub(lambda match: match.group(2).split(".")[-1] if match.group(1) in NAMING_ROLES else match.group(2),
                     text).replace("``", "")
    end = re.search(r"\.(\s|$)", plain)
    return plain[: end.start() + 1] if end else plain


def _enum_of(kind: Any) -> type[enum.Enum] | None:
    """The enum in ``kind`` (alone, or in a union), else ``None``."""
    for member in typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,):
        if isinstance(member, type) and issubclass(member, enum.Enum):
            return member
    return None


def _choices(kind: Any) -> list[str] | None:
    """The values of a ``str`` enum in ``kind`` (alone, or in a union), else ``None``."""
    found = _enum_of(kind)
    return None if found is None else [item.value for item in found]


def described(options: type, field: dataclasses.Field) -> str:
    """The first sentence of ``field``'s entry in ``options``'s docstring; where that sentence only points elsewhere
    ("See :class:`ChainStart`."), the first sentence of the enum in the field's annotation ("Where each chain
    starts.")."""
    sentence = first_sentence(documented_fields(options).get(field.name, ""))
    pointed = _enum_of(typing.get_type_hints(options)[field.name]) if sentence.startswith("See ") else None
    return first_sentence(inspect.cleandoc(pointed.__doc__)) if pointed is not None and pointed.__doc__ else sentence


def flag_settings(options: type, field: dataclasses.Field) -> dict[str, Any]:
    """``add_argument`` keywords for ``field`` of ``options``: its action, type or choices."""
    kind = typing.get_type_hints(options)[field.name]
    plain = {arg for arg in typing.get_args(kind) if arg is not type(None)} if isinstance(kind, types.UnionType) else {kind}
    listed = field.metadata.get("choices")
    if listed is not None:
        return {"choices": listed()}
    if plain == {bool}:
        return {"action": argparse.BooleanOptionalAction}
    choices = _choices(kind)
    if choices is not None:
        return {"choices": choices}
    for python_type in (int, float, Path):
        if plain == {python_type}:
            return {"type": python_type}
    return {"type": str}


def flag_fields() -> dict[str, list[tuple[str, type, dataclasses.Field]]]:
    """Every option that gets a flag, with the ``(method, option set, field)`` of each method that takes it, in the
    order of :data:`~bnn.inference.fit.METHODS`."""
    fields: dict[str, list[tuple[str, type, dataclasses.Field]]] = {}
    for name in METHODS:
        options = METHODS.get(name).options
        for field in dataclasses.fields(options):
            if field.name not in SET_BY_THE_COMMAND:
                fields.setdefault(field.name, []).append((name, options, field))
    return fields


def _default(field: dataclasses.Field) -> Any:
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    return value.value if isinstance(value, enum.Enum) else value


def _help(option: str, takers: list[tuple[str, type, dataclasses.Field]]) -> str:
    """The help of ``option``: the first method's description, then the default of every method that takes it."""
    description = next(filter(None, (described(options, field) for _, options, field in takers)), "")
    defaults: dict[str, list[str]] = {}
    for method, _, field in takers:
        value = _default(field)
        defaults.setdefault("unset" if value is None else repr(value), []).append(method)
    said = "; ".join(f"{', '.join(methods)}: {value}" for value, methods in defaults.items())
    return f"{description} [default {said}]".replace("%", "%%")


SHARED = "options of several methods"
"""The group of the flags that more than one method takes."""


def add_method_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for every option of every registered method: those several methods take in one group, the others in
    their method's group."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option, takers in flag_fields().items():
        method, options, field = takers[0]
        title = SHARED if len(takers) > 1 else method
        if title not in groups:
            groups[title] = parser.add_argument_group(title)
        groups[title].add_argument(f"--{option.replace('_', '-')}", dest=option, default=None, help=_help(option, takers),
                           **flag_settings(options, field))


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The methods' options the user gave as flags (those left at ``None`` are not given)."""
    return {option: getattr(args, option) for option in flag_fields() if getattr(args, option, None) is not None}
