"""Why a method refuses a network with hierarchical priors (:mod:`bnn.models.hierarchical_priors`), stated by the
method and checked before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HIERARCHICAL_METHODS = "svi with guide='autonormal' or 'meanfield', or nuts with init='prior' (or svgd)"
"""The methods that fit a network with hierarchical priors, named in every refusal."""


def for_hierarchical(defaults: dict[str, Any]):
    """A method's :attr:`~bnn.inference.core.method.Method.model_defaults`: ``defaults`` for a network with
    hierarchical priors (``{"guide": "autonormal"}``), none otherwise. An option the user gives still wins."""

    def model_defaults(model) -> dict[str, Any]:
        return dict(defaults) if getattr(model, "hierarchical_sites", None) else {}

    return model_defaults


def _hierarchical_layers(model) -> dict[str, str]:
    """The layers of ``model`` with a hierarchical prior, each with its prior's name."""
    layers: dict[str, str] = {}
    for name, prior in model.hierarchical_sites.items():
        layers.setdefault(name.rsplit(".", 1)[0], prior.config()["name"])
    return layers


def hierarchical_priors_named(model, priors: frozenset[str] | None = None) -> str:
    """The hierarchical priors of ``model`` by layer (only those named in ``priors``, when given), for a message:
    ``'ard' (layers.0), 'layer-scale' (layers.1)``."""
    return ", ".join(f"{prior!r} ({layer})" for layer, prior in _hierarchical_layers(model).items()
                     if priors is None or prior in priors)


@dataclass(frozen=True)
class HierarchicalRefusal:
    """A method that cannot fit latent prior scales, and why.

    Attributes
    ----------
    why : str
        The reason, for the refusal: ``"a joint MAP over weights and scales collapses the scales to zero"``.
    priors : frozenset of str, optional
        The registered names of the hierarchical priors refused (``None``: all of them).
    """

    why: str
    priors: frozenset[str] | None = None

    def check(self, method: str, model) -> None:
        """Raise ``ValueError`` naming the priors, the method, the reason and the methods that work, when ``model``
        has a hierarchical prior it refuses."""
        if any(self.priors is None or prior in self.priors for prior in _hierarchical_layers(model).values()):
            named = hierarchical_priors_named(model, self.priors)
            raise ValueError(f"method {method!r} cannot fit the hierarchical prior(s) {named} "
                             f"of {type(model).__name__}: {self.why}; use {HIERARCHICAL_METHODS}, or give those layers "
                             "a fixed prior (gaussian, laplace, ...)")


POINT_ESTIMATE = HierarchicalRefusal(
    "a joint MAP over the weights and their latent scales collapses the scales to zero (the density of the weights "
    "grows without bound as a scale and its weights shrink together; the laplace method sets the scales of 'layer-scale' "
    "and 'ard' to their type-II maximum instead)")
"""The refusal of the methods that start from or are a joint posterior mode (MAP, ensemble, MC dropout)."""
PER_WEIGHT_SCALES = HierarchicalRefusal(
    "the Laplace sets the scales of 'layer-scale' and 'ard' to their type-II maximum (the evidence), but the "
    "horseshoe's one local scale per weight at its type-II maximum is the relevance vector machine's degenerate case "
    "(each weight's precision fitted to that weight alone: infinite, or finite with no shrinkage shared)",
    frozenset({"horseshoe"}))
"""The refusal of the Laplace, which fits the other hierarchical priors (:mod:`bnn.inference.laplace.type2_scales`)."""
FIXED_PRIOR_POTENTIAL = HierarchicalRefusal(
    "its minibatch potential adds each weight site's fixed log prior, and it does not sample the scales' non-centred "
    "coordinates")
"""The refusal of SGLD, SGHMC and the cyclical samplers."""
WEIGHT_DECAY_PRIOR = HierarchicalRefusal(
    "its prior is a weight decay, a zero-mean Gaussian of fixed scale per site, so the latent scales of a hierarchical "
    "prior would be held, not fitted")
"""The refusal of IVON, whose prior enters as its optimiser's weight decay."""
