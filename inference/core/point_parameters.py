r"""The stage before a method for a partly Bayesian network: its point parameters fitted at the MAP.

A network whose parameters :math:`\theta = (\theta_B, \theta_P)` are Bayesian only in :math:`\theta_B` (a torch module
made Bayesian in its last layer, :mod:`bnn.models.torch_module`) holds :math:`\theta_P` fixed at a point. Until that
point is set, :func:`bnn.inference.fit` sets it here, first: the MAP of the wholly Bayesian network,

.. math::

    \hat\theta = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta), \qquad \hat\theta_P = \hat\theta|_P,

by the collection's MAP method; then the chosen method fits :math:`p(\theta_B \mid \mathcal{D}, \hat\theta_P)` and its
record lists :math:`P` (``held_at_map``). A network states that it is partly Bayesian by the methods of
:class:`PartlyBayesian`; every other network passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class PartlyBayesian(Protocol):
    """A network with parameters held fixed at a point (:class:`~bnn.models.torch_module.TorchModuleNetwork`)."""

    def needs_point_fit(self) -> bool:
        """Whether some parameters are held fixed and their values are not set yet."""

    def held_fixed(self) -> list[str]:
        """The parameters held fixed at a point."""

    def all_bayesian(self) -> Any:
        """The same network with every parameter Bayesian, whose MAP gives the point values."""

    def with_point_values(self, values: Mapping[str, torch.Tensor]) -> Any:
        """This network with the point parameters set from ``values`` (a value per parameter of :meth:`all_bayesian`)."""


def held_fixed(model) -> list[str]:
    """The parameters ``model`` holds fixed at a point, for the fit's record (empty for a wholly Bayesian network)."""
    return model.held_fixed() if isinstance(model, PartlyBayesian) else []


def needs_point_fit(model) -> bool:
    """Whether ``model`` holds parameters fixed at a point that is not set yet."""
    return isinstance(model, PartlyBayesian) and model.needs_point_fit()


def check_point_values_set(method: str, model) -> None:
    """Refuse, before any work, a network whose point parameters are not set (a method run directly, not by ``fit``)."""
    if needs_point_fit(model):
        raise ValueError(f"method {method!r} fits the Bayesian parameters of a partly Bayesian network, whose parameters "
                         f"{model.held_fixed()} must be fitted at a point first: call bnn.inference.fit, which does that "
                         "(or fit_point_parameters in bnn.inference.core.point_parameters)")


def fit_point_parameters(model, x: torch.Tensor, y: torch.Tensor, map_fit: Callable[..., Any],
                         map_options: Mapping[str, Any]):
    """``model`` with its point parameters set at the MAP of its wholly Bayesian version (module notes), or ``model``
    itself when it has none to set.

    Parameters
    ----------
    map_fit : callable
        ``map_fit(network, x, y, **map_options) -> Posterior`` of one draw (the MAP method).
    map_options : mapping
        The MAP fit's options (its seed, steps, ...).
    """
    if not needs_point_fit(model):
        return model
    point = map_fit(model.all_bayesian(), x, y, **map_options)
    return model.with_point_values({name: value.reshape(-1, *value.shape[2:])[0] for name, value in point.samples.items()})
