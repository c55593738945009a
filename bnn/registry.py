"""A named collection of choices (priors, likelihoods, guides, methods, data sets).

Every concept of the collection that a user picks by name lives in one
:class:`Registry`. The command line takes its choices from the same registries,
so a name that works in code works on the command line and vice versa.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A dict from names to entries that fails loudly on unknown names.

    Parameters
    ----------
    kind : str
        What the entries are ("prior", "guide", ...); used in error messages.

    Examples
    --------
    >>> priors = Registry("prior")
    >>> priors.register("gaussian", GaussianPrior)           # doctest: +SKIP
    >>> priors.get("gausian")                                  # doctest: +SKIP
    ValueError: unknown prior 'gausian'; choose from ['gaussian']
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None) -> T | Callable[[T], T]:
        """Add ``entry`` under ``name``; usable as a decorator when ``entry`` is omitted."""
        if entry is None:
            return lambda e: self.register(name, e)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} '{name}' is already registered; pick another name")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        """Return the entry called ``name`` or raise ``ValueError`` listing the choices."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown {self.kind} {name!r}; choose from {self.names()}") from None

    def name_of(self, entry: object) -> str | None:
        """The name ``entry`` is registered under, or ``None``."""
        for name, candidate in self._entries.items():
            if candidate is entry:
                return name
        return None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def config_of(obj: object, registry: Registry) -> dict[str, Any]:
    """``{"name": <registered name of type(obj)>, **dataclass fields}``, for saving by name."""
    name = registry.name_of(type(obj))
    if name is None:
        raise ValueError(
            f"{type(obj).__name__} is not registered as a {registry.kind}, so it cannot be "
            f"saved by name; register it under a name first"
        )
    options = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else {}
    return {"name": name, **options}


def build_from(spec: Any, registry: Registry, base: type) -> Any:
    """An instance of ``base`` from an instance, a registered name, or ``{"name": ..., **options}``."""
    if isinstance(spec, base):
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}  # a name alone: the entry's defaults, or an error naming the options it needs
    if isinstance(spec, Mapping) and "name" in spec:
        options = {k: v for k, v in spec.items() if k != "name"}
        entry = registry.get(spec["name"])
        try:
            return entry(**options)
        except TypeError as error:
            raise ValueError(f"bad options for {registry.kind} {spec['name']!r}: {error}") from None
    raise ValueError(
        f"a {registry.kind} must be a {base.__name__}, a registered name {registry.names()} "
        f"or {{'name': ..., **options}}; got {spec!r}"
    )
