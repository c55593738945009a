r"""Hierarchical priors: Gaussian weights whose scales are latent and learned with them.

A :class:`HierarchicalPrior` gives the weights of a layer (the sites it is given to that share a
:attr:`~bnn.models.sites.WeightSite.group`) a conditional Gaussian :math:`w_k \mid \xi \sim \mathcal{N}(0, s_k(\xi)^2)`
and puts a prior on the scales :math:`\xi`, which become latent sample sites of the Pyro program, named after the
layer and drawn before its weights:

``layer-scale``
    One scale per layer, :math:`w_k \sim \mathcal{N}(0, \tau^2)`, :math:`\tau \sim \text{HalfCauchy}(s)`; the site
    ``<layer>.scale``. The half-Cauchy (Gelman 2006) keeps mass near zero and a heavy tail, so that the data decide
    the layer's scale; the inverse-gamma alternative on :math:`\tau^2` is not offered.
``ard``
    Automatic relevance determination of the inputs of a dense layer (MacKay 1994; Neal 1996): one scale per input
    column :math:`j` of the layer's weight, :math:`W_{:, j} \sim \mathcal{N}(0, \tau^2 \lambda_j^2)`, with
    :math:`\tau \sim \text{HalfCauchy}(s)` (site ``<layer>.scale``) and :math:`\lambda_j \sim \text{HalfCauchy}(1)`
    (site ``<layer>.relevance``, shape ``(in_features,)``); the layer's bias is :math:`\mathcal{N}(0, \tau^2)`.
    Given to the first layer, :math:`\lambda_j` measures how much input :math:`j` matters.
``horseshoe``
    The regularised horseshoe of Piironen and Vehtari (2017): :math:`w_k \sim \mathcal{N}(0, \tau^2
    \tilde\lambda_k^2)` with :math:`\tilde\lambda_k^2 = c^2\lambda_k^2 / (c^2 + \tau^2\lambda_k^2)`,
    :math:`\lambda_k \sim \text{HalfCauchy}(1)` one per weight (site ``<site>.local``) and :math:`\tau \sim
    \text{HalfCauchy}(s)` (site ``<layer>.scale``). The slab width :math:`c` (fixed, ``slab_scale``) bounds the
    scale of the weights the data pull away from zero: the plain horseshoe of Carvalho, Polson and Scott (2010)
    (:math:`c \to \infty`) leaves them unregularised, and its posterior is known to make NUTS diverge where the
    likelihood does not identify a weight, which a network's rarely does.

The Pyro program samples the weights non-centred, :math:`w_k = s_k(\xi)\,z_k` with :math:`z_k \sim \mathcal{N}(0, 1)`
under the site ``<site>_decentered`` (the coordinates of Pyro's ``LocScaleReparam(0)``), so that NUTS and the
mean-field guides meet no funnel between a scale and its weights; the weights are reported under their own names
(:meth:`bnn.models.network.BayesianNetwork.reported_values`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyro.distributions as dist
import torch
from bnn.models.priors import Prior, _check_positive, register_prior
from bnn.models.sites import WeightSite

SCALE = "scale"
"""The suffix of a layer's global scale site: ``layers.0.scale``."""
RELEVANCE = "relevance"
"""The suffix of the ARD relevance site of a layer: ``layers.0.relevance``."""
LOCAL = "local"
"""The suffix of a horseshoe's per-weight local scale site: ``layers.0.weight.local``."""


def _lift(value: torch.Tensor, event_dims: int, trailing_ones: int) -> torch.Tensor:
    """``value`` of shape ``(*lead, *event)`` (``event_dims`` dims) with ``trailing_ones`` singleton dims inserted after
    ``lead``, so that it broadcasts against ``(*lead, *site.shape)``."""
    lead = value.shape[: value.dim() - event_dims]
    return value.reshape(lead + (1,) * trailing_ones + value.shape[value.dim() - event_dims:])


class HierarchicalPrior(Prior):
    r"""Base class of the priors with latent scales :math:`\xi`: :math:`w_k \mid \xi \sim \mathcal{N}(0, s_k(\xi)^2)`.

    A subclass states the scale sites of a layer (:meth:`scale_sites`) and the weights' standard deviation given
    their values (:meth:`site_scale`). It has no fixed :meth:`distribution`: the weights' prior is the conditional
    :meth:`conditional`, whose scales the model draws first.
    """

    global_scale: float

    @abc.abstractmethod
    def scale_sites(self, group: str, sites: Sequence[WeightSite]) -> dict[str, dist.Distribution]:
        """The scale sites of layer ``group``, whose sites given this prior are ``sites``: name -> distribution (its
        ``event_shape`` is the scale's shape, its ``batch_shape`` empty)."""

    @abc.abstractmethod
    def site_scale(self, site: WeightSite, scales: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The standard deviation :math:`s(\\xi)` of the entries of ``site`` given the values of its layer's scale
        sites, each ``(*lead, *scale_shape)``: a tensor that broadcasts against ``(*lead, *site.shape)``."""

    def conditional(self, site: WeightSite, scales: Mapping[str, torch.Tensor]) -> dist.Distribution:
        """:math:`\\mathcal{N}(0, s(\\xi)^2)` of ``site``, batch shape ``(*lead, *site.shape)``, no event dims."""
        scale = self.site_scale(site, scales)
        return dist.Normal(torch.zeros((), dtype=scale.dtype), scale).expand(torch.broadcast_shapes(scale.shape, site.shape))

    def distribution(self, site: WeightSite) -> dist.Distribution:
        raise TypeError(f"the prior {type(self).__name__} of site {site.name!r} is hierarchical: its weights have no fixed "
                        "distribution, only one given their latent scales (conditional(site, scales))")

    def _global_scale_site(self, group: str) -> dict[str, dist.Distribution]:
        return {f"{group}.{SCALE}": dist.HalfCauchy(torch.tensor(float(self.global_scale)))}


@register_prior("layer-scale")
@dataclass(frozen=True)
class LayerScalePrior(HierarchicalPrior):
    r""":math:`w_k \sim \mathcal{N}(0, \tau^2)` with one :math:`\tau \sim \text{HalfCauchy}(s)` per layer, :math:`s` =
    ``global_scale`` (module notes)."""

    global_scale: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self, global_scale=self.global_scale)

    def scale_sites(self, group: str, sites: Sequence[WeightSite]) -> dict[str, dist.Distribution]:
        return self._global_scale_site(group)

    def site_scale(self, site: WeightSite, scales: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return _lift(scales[f"{site.group}.{SCALE}"], 0, len(site.shape))


@register_prior("ard")
@dataclass(frozen=True)
class ARDPrior(HierarchicalPrior):
    r"""Automatic relevance determination: :math:`W_{:, j} \sim \mathcal{N}(0, \tau^2\lambda_j^2)`,
    :math:`\lambda_j \sim \text{HalfCauchy}(1)`, :math:`\tau \sim \text{HalfCauchy}(s)`, :math:`s` = ``global_scale``;
    a bias :math:`\mathcal{N}(0, \tau^2)` (module notes). The layer needs one weight site of two dimensions."""

    global_scale: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self, global_scale=self.global_scale)

    def scale_sites(self, group: str, sites: Sequence[WeightSite]) -> dict[str, dist.Distribution]:
        weights = [site for site in sites if len(site.shape) == 2]
        if len(weights) != 1:
            raise ValueError(f"the ard prior of layer {group!r} needs exactly one weight site of shape (out_features, "
                             f"in_features) in it, got the sites {[(site.name, tuple(site.shape)) for site in sites]}; "
                             "give 'ard' to a dense layer")
        in_features = weights[0].shape[1]
        return {**self._global_scale_site(group),
                f"{group}.{RELEVANCE}": dist.HalfCauchy(torch.ones(in_features)).to_event(1)}

    def site_scale(self, site: WeightSite, scales: Mapping[str, torch.Tensor]) -> torch.Tensor:
        tau = _lift(scales[f"{site.group}.{SCALE}"], 0, len(site.shape))
        if len(site.shape) != 2:
            return tau
        return tau * _lift(scales[f"{site.group}.{RELEVANCE}"], 1, 1)


@register_prior("horseshoe")
@dataclass(frozen=True)
class HorseshoePrior(HierarchicalPrior):
    r"""The regularised horseshoe (Piironen and Vehtari 2017): :math:`w_k \sim \mathcal{N}(0, \tau^2\tilde\lambda_k^2)`,
    :math:`\tilde\lambda_k^2 = c^2\lambda_k^2/(c^2 + \tau^2\lambda_k^2)`, :math:`\lambda_k \sim \text{HalfCauchy}(1)`,
    :math:`\tau \sim \text{HalfCauchy}(s)`, with :math:`s` = ``global_scale`` and the slab width :math:`c` =
    ``slab_scale`` (module notes: the regularised form, not the plain one)."""

    global_scale: float = 1.0
    slab_scale: float = 2.0

    def __post_init__(self) -> None:
        _check_positive(self, global_scale=self.global_scale, slab_scale=self.slab_scale)

    def scale_sites(self, group: str, sites: Sequence[WeightSite]) -> dict[str, dist.Distribution]:
        local = {f"{site.name}.{LOCAL}": dist.HalfCauchy(torch.ones(site.shape)).to_event(len(site.shape))
                 for site in sites}
        return {**self._global_scale_site(group), **local}

    def site_scale(self, site: WeightSite, scales: Mapping[str, torch.Tensor]) -> torch.Tensor:
        tau = _lift(scales[f"{site.group}.{SCALE}"], 0, len(site.shape))
        local = scales[f"{site.name}.{LOCAL}"]
        slab = self.slab_scale**2
        return tau * local * torch.rsqrt(1.0 + (tau * local) ** 2 / slab)
