"""What a fit records about itself: one small typed dataclass per method, written to ``fit.json`` and read back here.

Every method subclasses :class:`FitRecord` with the facts it keeps (SVI its ELBO history, NUTS its chains and
convergence diagnostics, Laplace its curvature and evidence) and registers it with :func:`register_record`
under its method name. :func:`read_record` rebuilds the right class from JSON, checking every field, so a
damaged or foreign ``fit.json`` fails with a ``ValueError`` naming what is wrong instead of a ``KeyError`` later.
Downstream code (the comparison table, ``metrics.json``, the report) reads the record's :meth:`~FitRecord.metrics`,
:attr:`~FitRecord.converged` and :meth:`~FitRecord.problems` instead of recomputing them.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from bnn.inference.core.temperature import UNTEMPERED, tempered_label

from bnn.options import Options

RECORDS: dict[str, type[FitRecord]] = {}


@dataclass(kw_only=True)
class FitRecord:
    """The facts every fit records.

    Attributes
    ----------
    seed : int
        The seed the fit ran with.
    train_seconds : float
        Wall time of the fit.
    guide : str or None
        The variational family (SVI's guide name, ``"laplace"``), ``None`` for samplers.
    dataset : str or None
        The data set's name when the fit was given a :class:`~bnn.datasets.Dataset`.
    held_at_map : list of str
        The parameters of a partly Bayesian network held fixed at a point while the method fitted the others: the MAP
        of the wholly Bayesian network when ``fit`` set them (:mod:`bnn.inference.core.point_parameters`, not counted
        in ``train_seconds``), else the values the network was built with; empty for a wholly Bayesian one.
    device : str
        Where the fit computed: ``"cpu"`` or ``"cuda"`` (:mod:`bnn.inference.core.device`).
    """

    method: ClassVar[str] = ""
    seed: int
    train_seconds: float
    guide: str | None = None
    dataset: str | None = None
    held_at_map: list[str] = dataclasses.field(default_factory=list)
    device: str = "cpu"

    @property
    def label(self) -> str:
        """How reports name the fit: its method (a method whose variational family varies adds it), and its
        temperature where it is not 1 (:func:`~bnn.inference.core.temperature.tempered_label`)."""
        return tempered_label(self.method, self.temperature)

    @property
    def temperature(self) -> float:
        """The likelihood temperature the fit ran at (:mod:`bnn.inference.core.temperature`): its options'
        ``temperature``, 1 for a method without one."""
        return getattr(getattr(self, "options", None), "temperature", UNTEMPERED)

    @property
    def converged(self) -> bool | None:
        """The method's own verdict on its result (``None`` where the method has no check)."""
        return None

    @property
    def interrupted(self) -> str | None:
        """What an interrupt (Ctrl-C, SIGTERM) that the fit survived, keeping what it had made, cut short; ``None``
        when none did (a method that cannot keep partial work raises ``KeyboardInterrupt`` instead)."""
        return None

    def problems(self) -> list[str]:
        """The method's own warnings about this fit, one sentence each, for reports (empty when all is well); the
        convergence of Markov chains is judged from their
        :class:`~bnn.inference.diagnostics.convergence.ChainDiagnostics` instead."""
        return []

    def metrics(self) -> dict[str, Any]:
        """The entries of this record worth a column in ``metrics.json`` and the comparison table."""
        return {}

    def load_linearization(self, directory: Path, model) -> Any:
        """The method's linearised predictive saved in ``directory`` (none by default)."""
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict: ``method`` and every field (nested records as dicts, the method's options as
        :meth:`~bnn.options.Options.to_json` writes them)."""
        data = {entry.name: getattr(self, entry.name) for entry in dataclasses.fields(self)}
        return {"method": self.method, **{name: value.to_json() if isinstance(value, Options)
                                          else dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
                                          for name, value in data.items()}}


def register_record(cls: type[FitRecord], method: str) -> None:
    """Register ``cls`` as the record of ``method`` and give it that name (what its :meth:`FitRecord.to_json` writes
    and :func:`read_record` finds it by); :class:`~bnn.inference.core.method.Method` calls it with its own name, so a
    record's method name is never typed twice. ``ValueError`` for a record already registered under another name."""
    named = cls.__dict__.get("method")  # its own name, not one inherited from the record it extends
    if named and named != method:
        raise ValueError(f"{cls.__name__} is the record of method {cls.method!r}, not of {method!r}: give each method its "
                         "own record class")
    cls.method = method
    RECORDS[method] = cls


JSON_TYPES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list", dict: "an object"}


def _matches(kind: Any, value: Any) -> bool:
    """Whether the JSON ``value`` is of the plain type ``kind`` (``int`` for ``int``, ``int`` or ``float`` for ``float``)."""
    kind = typing.get_origin(kind) or kind
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind) if kind in JSON_TYPES else True


def _value(name: str, annotation: Any, value: Any) -> Any:
    """``value`` read as ``annotation``: nested dataclasses are built (strictly), plain JSON values checked for type.
    A ``null`` where a number (or a list of numbers) must be is NaN: JSON has no NaN, so it was written as ``null``
    (:func:`~bnn.runtime.atomic.finite_or_null`)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None:
        if type(None) in options:
            return None
        if float in options:
            return math.nan
        raise ValueError(f"field {name!r} is null but must hold a value")
    if list[float] in options and isinstance(value, list):
        value = [math.nan if item is None else item for item in value]
    for kind in options:
        items = typing.get_args(kind) if typing.get_origin(kind) is list else ()
        if isinstance(value, list) and len(items) == 1 and items[0] in JSON_TYPES:
            wrong = next((item for item in value if not _matches(items[0], item)), None)
            if wrong is not None:
                raise ValueError(f"field {name!r} must be a list whose every item is {JSON_TYPES[items[0]]}, got the "
                                 f"item {wrong!r}")
    for option in options:
        if dataclasses.is_dataclass(option):
            return build(option, value, name)
    kinds = [option for option in options if option is not type(None)]
    if not any(_matches(kind, value) for kind in kinds):
        expected = " or ".join(JSON_TYPES.get(typing.get_origin(kind) or kind, str(kind)) for kind in kinds)
        raise ValueError(f"field {name!r} must be {expected}, got {value!r}")
    return value


def build(cls: type, data: Any, where: str = "record") -> Any:
    """An instance of the dataclass ``cls`` from the dict ``data``; ``ValueError`` names a missing, unknown or
    ill-typed field."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {entry.name: entry for entry in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}; {cls.__name__} has {sorted(known)}")
    required = [name for name, entry in known.items()
                if entry.default is dataclasses.MISSING and entry.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise ValueError(f"{where} lacks the field(s) {missing} of {cls.__name__}")
    return cls(**{name: _value(f"{where}.{name}", hints[name], value) for name, value in data.items()})


def read_record(data: Any) -> FitRecord:
    """The :class:`FitRecord` subclass of ``data["method"]`` built from ``data`` (as written by
    :meth:`FitRecord.to_json`).

    Raises
    ------
    ValueError
        For an unknown method or a missing, unknown or ill-typed field.
    """
    if not isinstance(data, dict) or "method" not in data:
        raise ValueError("the fit record must be a JSON object with a 'method'")
    fields = dict(data)
    method = fields.pop("method")
    if method not in RECORDS:
        raise ValueError(f"the fit record names an unknown method {method!r}; this version knows {sorted(RECORDS)}")
    return build(RECORDS[method], fields, f"the {method} record")
