r"""Pyro's :class:`~pyro.infer.autoguide.AutoNormal`: a mean-field Gaussian over every latent,

.. math:: q(W) = \prod_k \mathcal{N}(w_k; \mu_k, \sigma_k^2)

in the unconstrained space (so a positive noise scale gets a log-normal).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from pyro.infer.autoguide import AutoNormal, init_to_median, init_to_sample, init_to_value

from guides.registry import register_guide

INIT_LOCATIONS = {"prior": init_to_sample, "median": init_to_median}


@register_guide("autonormal", description="Pyro AutoNormal, mean-field Gaussian")
def autonormal(model, *, init_scale: float = 0.1, init_loc: str | Mapping[str, torch.Tensor] = "prior") -> AutoNormal:
    """Build an AutoNormal guide for ``model``.

    Parameters
    ----------
    init_scale : float
        Initial standard deviation :math:`\\sigma_k` of every factor.
    init_loc : {"prior", "median"} or mapping
        ``"prior"`` starts each :math:`\\mu_k` at a draw from the prior (breaks the
        symmetry of hidden units), ``"median"`` at the prior median, and a mapping from
        site names to tensors (for example MAP weights) at those values, drawing the rest
        from the prior.
    """
    if not (isinstance(init_scale, (int, float)) and 0 < init_scale < float("inf")):
        raise ValueError(f"init_scale must be a positive number, got {init_scale!r}")
    if isinstance(init_loc, Mapping):
        init_loc_fn = init_to_value(values=dict(init_loc), fallback=init_to_sample)
    elif init_loc in INIT_LOCATIONS:
        init_loc_fn = INIT_LOCATIONS[init_loc]
    else:
        raise ValueError(f"init_loc must be one of {sorted(INIT_LOCATIONS)} or a mapping of site values, got {init_loc!r}")
    return AutoNormal(model, init_loc_fn=init_loc_fn, init_scale=float(init_scale))
