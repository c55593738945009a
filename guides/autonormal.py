r"""Pyro's :class:`~pyro.infer.autoguide.AutoNormal`: a mean-field Gaussian over every latent,

.. math:: q(W) = \prod_k \mathcal{N}(w_k; \mu_k, \sigma_k^2)

in the unconstrained space (so a positive noise scale gets a log-normal).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from bnn.guides.registry import register_guide
from pyro.infer.autoguide import AutoNormal, init_to_median, init_to_sample, init_to_value

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

    Raises
    ------
    ValueError
        For a non-positive ``init_scale``, an unknown ``init_loc`` name, or a mapping with a name that
        is not a latent site of ``model`` or a value that is not a finite tensor of that site's shape.
    """
    if isinstance(init_scale, bool) or not (isinstance(init_scale, (int, float)) and 0 < init_scale < float("inf")):
        raise ValueError(f"init_scale must be a positive number, got {init_scale!r}")
    if isinstance(init_loc, Mapping):
        init_loc_fn = init_to_value(values=_checked_values(model, init_loc), fallback=init_to_sample)
    elif init_loc in INIT_LOCATIONS:
        init_loc_fn = INIT_LOCATIONS[init_loc]
    else:
        raise ValueError(f"init_loc must be one of {sorted(INIT_LOCATIONS)} or a mapping of site values, got {init_loc!r}")
    return AutoNormal(model, init_loc_fn=init_loc_fn, init_scale=float(init_scale))


def _checked_values(model, values: Mapping[str, object]) -> dict[str, torch.Tensor]:
    """``values`` as tensors in the default dtype, after checking each names a latent site of ``model``
    (``model.latent_shapes``) and has that site's shape and finite entries."""
    shapes = model.latent_shapes
    valid = ", ".join(f"{name} {tuple(shape)}" for name, shape in shapes.items())
    unknown = sorted(set(values) - set(shapes), key=str)
    if unknown:
        raise ValueError(f"init_loc names {unknown}, which are not latent sites of the model; the sites and shapes are: {valid}")
    checked = {}
    for name, value in values.items():
        try:
            tensor = torch.as_tensor(value, dtype=torch.get_default_dtype())
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"init_loc[{name!r}] is not numeric ({error}); "
                             f"give a tensor of shape {tuple(shapes[name])}") from None
        if tensor.shape != shapes[name]:
            raise ValueError(f"init_loc[{name!r}] has shape {tuple(tensor.shape)}, but site {name!r} has shape "
                             f"{tuple(shapes[name])}; the sites and shapes are: {valid}")
        if not torch.isfinite(tensor).all():
            raise ValueError(f"init_loc[{name!r}] has NaN or infinite entries; give finite starting values")
        checked[name] = tensor
    return checked
