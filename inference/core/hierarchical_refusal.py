"""Why a method refuses a network with hierarchical priors (:mod:`bnn.models.hierarchical_priors`), stated by the
method and checked before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HIERARCHICAL_METHODS = "svi with guide='autonormal' or 'meanfield', or nuts with init='prior'"
"""The methods that fit a network with hierarchical priors, named in every refusal."""


def for_hierarchical(defaults: dict[str, Any]):
    """A method's :attr:`~bnn.inference.core.method.Method.model_defaults`: ``defaults`` for a network with
    hierarchical priors (``{"guide": "autonormal"}``), none otherwise. An option the user gives still wins."""

    def model_defaults(model) -> dict[str, Any]:
        return dict(defaults) if getattr(model, "hierarchical_sites", None) else {}

    return model_defaults


def hierarchical_priors_named(model) -> str:
    """The hierarchical priors of ``model`` by layer, for a message: ``'ard' (layers.0), 'layer-scale' (layers.1)``."""
    layers: dict[str, str] = {}
    for name, prior in model.hierarchical_sites.items():
        layers.setdefault(name.rsplit(".", 1)[0], prior.config()["name"])
    return ", ".join(f"{prior!r} ({layer})" for layer, prior in layers.items())


@dataclass(frozen=True)
class HierarchicalRefusal:
    """A method that cannot fit latent prior scales, and why.

    Attributes
    ----------
    why : str
        The reason, for the refusal: ``"a joint MAP over weights and scales collapses the scales to zero"``.
    """

    why: str

    def check(self, method: str, model) -> None:
        """Raise ``ValueError`` naming the priors, the method, the reason and the methods that work, when ``model``
        has a hierarchical prior."""
        if model.hierarchical_sites:
            raise ValueError(f"method {method!r} cannot fit the hierarchical prior(s) {hierarchical_priors_named(model)} "
                             f"of {type(model).__name__}: {self.why}; use {HIERARCHICAL_METHODS}, or give those layers "
                             "a fixed prior (gaussian, laplace, ...)")


POINT_ESTIMATE = HierarchicalRefusal(
    "a joint MAP over the weights and their latent scales collapses the scales to zero (the density of the weights "
    "grows without bound as a scale and its weights shrink together)")
"""The refusal of the methods that start from or are a joint posterior mode (MAP, ensemble, Laplace, MC dropout)."""
FIXED_PRIOR_POTENTIAL = HierarchicalRefusal(
    "its minibatch potential adds each weight site's fixed log prior, and it does not sample the scales' non-centred "
    "coordinates")
"""The refusal of SGLD and SGHMC."""
