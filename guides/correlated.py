r"""Pyro's guides over all latents at once, by name: ``full``, ``lowrank`` and ``flow``.

Each flattens the latents into one unconstrained vector :math:`z \in \mathbb{R}^D` and fits a joint law:

- ``full``: :class:`~pyro.infer.autoguide.AutoMultivariateNormal`, :math:`q(z) = \mathcal{N}(\mu, LL^\top)` with a
  lower-triangular :math:`L`: every correlation, :math:`D(D+3)/2` parameters, so its memory grows as :math:`D^2` (a fit
  that would not fit in memory is refused before any work, with the numbers);
- ``lowrank``: :class:`~pyro.infer.autoguide.AutoLowRankMultivariateNormal`,
  :math:`q(z) = \mathcal{N}(\mu, WW^\top + \operatorname{diag}(d^2))` with :math:`W \in \mathbb{R}^{D \times r}`:
  the :math:`r` strongest directions of correlation, :math:`D(r + 2)` parameters (``rank``, by default
  :math:`\sqrt D` rounded, Pyro's);
- ``flow``: :class:`~pyro.infer.autoguide.AutoIAFNormal`, a standard normal pushed through ``num_transforms``
  inverse autoregressive flows (Kingma et al. 2016), a law that need not be Gaussian. Its default of two flows
  (Pyro's is one) was chosen on the conjugate model: with one, 2,000 steps left a variance 20 times the exact one.

Where the posterior is Gaussian (the conjugate linear regression), ``full``, ``lowrank`` with :math:`r \ge D` and
``flow`` contain it; the mean-field guides do not, and underestimate its variances. They start at :func:`~bnn.guides.autonormal`'s
locations (``init_loc``). Pyro's compiled ELBO can fail on these guides' parameters (an assertion in ``pyro.ops.jit``),
so SVI runs them without JIT.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from bnn.guides.autonormal import checked_init_scale, init_location
from bnn.guides.registry import register_guide
from pyro.infer.autoguide import AutoIAFNormal, AutoLowRankMultivariateNormal, AutoMultivariateNormal


@register_guide("full", description="Pyro AutoMultivariateNormal, a full-covariance Gaussian", compiles=False)
def full(model, *, init_scale: float = 0.1, init_loc: str | Mapping[str, torch.Tensor] = "prior") -> AutoMultivariateNormal:
    """A full-covariance Gaussian over all latents (module notes); ``init_scale`` is :math:`L`'s starting diagonal."""
    return AutoMultivariateNormal(model, init_loc_fn=init_location(model, init_loc), init_scale=checked_init_scale(init_scale))


@register_guide("lowrank", description="Pyro AutoLowRankMultivariateNormal, a diagonal plus low-rank Gaussian",
                compiles=False)
def lowrank(model, *, rank: int | None = None, init_scale: float = 0.1,
            init_loc: str | Mapping[str, torch.Tensor] = "prior") -> AutoLowRankMultivariateNormal:
    """A Gaussian with a diagonal plus rank-``rank`` covariance (module notes)."""
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise ValueError(f"rank must be a positive integer, got {rank!r}")
    return AutoLowRankMultivariateNormal(model, init_loc_fn=init_location(model, init_loc),
                                         init_scale=checked_init_scale(init_scale), rank=rank)


@register_guide("flow", description="Pyro AutoIAFNormal, a normalising flow", compiles=False)
def flow(model, *, num_transforms: int = 2, hidden_dim: int | None = None,
         init_loc: str | Mapping[str, torch.Tensor] = "prior") -> AutoIAFNormal:
    """A normal pushed through ``num_transforms`` inverse autoregressive flows, each an autoregressive network of
    ``hidden_dim`` units (default Pyro's, :math:`D + 10`) (module notes)."""
    for name, value in (("num_transforms", num_transforms), ("hidden_dim", hidden_dim)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return AutoIAFNormal(model, init_loc_fn=init_location(model, init_loc), num_transforms=num_transforms,
                         hidden_dim=None if hidden_dim is None else [hidden_dim])
