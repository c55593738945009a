r"""A fitted posterior made into a prior: every weight its own Gaussian, the start of continual learning.

After task :math:`t` a method leaves an approximate posterior :math:`q_t(W) \approx p(W \mid \mathcal{D}_{1:t})`.
Bayes' rule on the next task's data,

.. math::

    p(W \mid \mathcal{D}_{1:t+1}) \propto p(\mathcal{D}_{t+1} \mid W)\, p(W \mid \mathcal{D}_{1:t})
    \approx p(\mathcal{D}_{t+1} \mid W)\, q_t(W),

makes :math:`q_t` the prior of task :math:`t + 1` (variational continual learning, Nguyen et al. 2018; online
Laplace, Ritter et al. 2018). Here :math:`q_t` is a product of independent Gaussians,

.. math::

    q_t(W) = \prod_k \mathcal{N}(w_k;\, m_k, s_k^2),

one mean :math:`m_k` and one scale :math:`s_k` per weight, kept per site in :class:`PosteriorPrior` (built by
``Posterior.as_prior()``). The prior is registered as ``posterior``: its config holds the means and scales as
nested lists, so it saves with a model and comes back from JSON. It covers the sites it was made for; a
mapping gives other sites (a new task's output head) another prior:
``model.prior = {"*": posterior.as_prior(), "heads.3": "gaussian"}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from bnn.models.priors import PRIORS, NormalPrior, register_prior
from bnn.models.sites import WeightSite


def _site_tensors(what: str, values: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    if not isinstance(values, Mapping) or not values:
        raise ValueError(f"PosteriorPrior: {what} must be a non-empty mapping from site names to arrays, got {values!r}")
    tensors = {}
    for name, value in values.items():
        try:
            tensor = torch.as_tensor(value, dtype=torch.get_default_dtype()).detach().clone()
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"PosteriorPrior: {what}[{name!r}] is not a numeric array ({error})") from None
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"PosteriorPrior: {what}[{name!r}] has entries that are not finite")
        tensors[name] = tensor
    return tensors


@register_prior("posterior")
class PosteriorPrior(NormalPrior):
    r""":math:`w_k \sim \mathcal{N}(m_k, s_k^2)` with a mean and a scale of its own for every weight of the given sites.

    Parameters
    ----------
    loc : mapping of str to array
        :math:`m` of each site, shaped like the site (tensors or nested lists).
    scale : mapping of str to array
        :math:`s > 0` of each site, the same sites and shapes as ``loc``.
    source : str
        How the means and scales were obtained (``"meanfield"``, ``"laplace-diag"``, ``"moment-matching"``, ...),
        kept for reports.

    Raises
    ------
    ValueError
        For mappings with other sites or shapes, non-finite entries or scales that are not positive; when asked
        for a site it does not hold or holds at another shape (a posterior of another model).
    """

    def __init__(self, loc: Mapping[str, Any], scale: Mapping[str, Any], source: str = "given") -> None:
        self.loc = _site_tensors("loc", loc)
        self.scale = _site_tensors("scale", scale)
        if set(self.loc) != set(self.scale):
            raise ValueError(f"PosteriorPrior: loc and scale must name the same sites, got {sorted(self.loc)} "
                             f"and {sorted(self.scale)}")
        for name, loc_value in self.loc.items():
            if self.scale[name].shape != loc_value.shape:
                raise ValueError(f"PosteriorPrior: site {name!r} has loc of shape {tuple(loc_value.shape)} but scale "
                                 f"of shape {tuple(self.scale[name].shape)}")
            if not bool((self.scale[name] > 0).all()):
                raise ValueError(f"PosteriorPrior: scale[{name!r}] must be positive everywhere; a posterior with a "
                                 "point mass (a weight held fixed) cannot be a Gaussian prior")
        if not isinstance(source, str) or not source:
            raise ValueError(f"PosteriorPrior: source must be a non-empty string, got {source!r}")
        self.source = source

    def site_loc_scale(self, site: WeightSite) -> tuple[torch.Tensor, torch.Tensor]:
        if site.name not in self.loc:
            raise ValueError(
                f"this posterior prior holds the sites {sorted(self.loc)}, not {site.name!r}: it was made from a "
                "posterior of another model; give that site its own prior with a mapping, e.g. "
                f"{{'*': posterior_prior, {site.name.rsplit('.', 1)[0]!r}: 'gaussian'}}"
            )
        loc, scale = self.loc[site.name], self.scale[site.name]
        if loc.shape != site.shape:
            raise ValueError(f"this posterior prior holds site {site.name!r} with shape {tuple(loc.shape)}, but the "
                             f"model's site has shape {tuple(site.shape)}: it was made from a posterior of another model")
        return loc, scale

    @property
    def num_weights(self) -> int:
        """Number of scalar weights the prior covers."""
        return sum(value.numel() for value in self.loc.values())

    def config(self) -> dict[str, Any]:
        """``{"name": "posterior", "loc": ..., "scale": ..., "source": ...}`` with nested lists, JSON-able."""
        return {
            "name": PRIORS.name_of(type(self)),
            "loc": {name: value.tolist() for name, value in self.loc.items()},
            "scale": {name: value.tolist() for name, value in self.scale.items()},
            "source": self.source,
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PosteriorPrior):
            return NotImplemented
        return (self.source == other.source and self.loc.keys() == other.loc.keys()
                and all(torch.equal(self.loc[k], other.loc[k]) and torch.equal(self.scale[k], other.scale[k])
                        for k in self.loc))

    __hash__ = None

    def __repr__(self) -> str:
        mean_scale = math.exp(sum(v.log().sum().item() for v in self.scale.values()) / self.num_weights)
        return (f"PosteriorPrior(source={self.source!r}, sites={len(self.loc)}, weights={self.num_weights}, "
                f"geometric mean scale={mean_scale:.3g})")
