"""What a method needs of a network beyond the model interface, stated by the method and checked before any work."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelRequirement:
    """A property of the network that a method relies on.

    Attributes
    ----------
    what : str
        The property, for the refusal: ``"a network that says where its dropout goes (...)"``.
    holds : callable
        ``holds(model) -> bool``.
    """

    what: str
    holds: Callable[[object], bool]

    def check(self, method: str, model, instead: Sequence[str]) -> None:
        """Raise ``ValueError`` naming the method, the network and the methods that work (``instead``: those that fit
        any network), unless the property holds."""
        if not self.holds(model):
            methods = ", ".join(instead[:-1]) + f" or {instead[-1]}" if len(instead) > 1 else "".join(instead)
            raise ValueError(f"method {method!r} needs {self.what}, which {type(model).__name__} is not; use {methods}")


DROPPED_INPUTS = ModelRequirement("a network that says where its dropout goes (model.dropped_inputs() is not None: "
                                  "a chain of dense layers, or a network that states its dropped layers)",
                                  lambda model: model.dropped_inputs() is not None)
"""The network states the layers whose inputs MC dropout drops (:meth:`~bnn.models.network.BayesianNetwork.dropped_inputs`)."""
