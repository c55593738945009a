r"""Pyro's :class:`~pyro.infer.autoguide.AutoNormal`: a mean-field Gaussian over every latent,

.. math:: q(W) = \prod_k \mathcal{N}(w_k; \mu_k, \sigma_k^2)

in the unconstrained space (so a positive noise scale gets a log-normal).

**Its start.** ``init_loc="prior"`` (the default) starts the weights at a draw of their prior, which breaks the
symmetry of the hidden units, and every other latent (the scales of hierarchical priors, a learned noise) at its
prior's median, as :meth:`bnn.guides.flat_normal.FlatNormalGuide.prior_start` does. A draw of a half-Cauchy scale can
land decades from the bulk: an ARD relevance drawn near zero starts the first layer's weights near zero, and SVI can
settle there, a network that ignores its input; the medians avoid it (chosen on the built-in data:
``benchmarks/results/autonormal_init.md``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from bnn.guides.flat_normal import prior_median
from bnn.guides.registry import register_guide
from pyro.infer.autoguide import AutoNormal, init_to_median, init_to_sample, init_to_value

INIT_LOCATIONS = ("prior", "median")


@register_guide("autonormal", description="Pyro AutoNormal, mean-field Gaussian")
def autonormal(model, *, init_scale: float = 0.1, init_loc: str | Mapping[str, torch.Tensor] = "prior") -> AutoNormal:
    """Build an AutoNormal guide for ``model``.

    Parameters
    ----------
    init_scale : float
        Initial standard deviation :math:`\\sigma_k` of every factor.
    init_loc : {"prior", "median"} or mapping
        ``"prior"`` starts each weight's :math:`\\mu_k` at a draw from its prior (breaks the
        symmetry of hidden units) and the other latents at their prior medians (module notes),
        ``"median"`` every latent at its prior median, and a mapping from site names to tensors
        (for example MAP weights) at those values, the rest as ``"prior"``.

    Raises
    ------
    ValueError
        For a non-positive ``init_scale``, an unknown ``init_loc`` name, or a mapping with a name that
        is not a latent site of ``model`` or a value that is not a finite tensor of that site's shape.
    """
    return AutoNormal(model, init_loc_fn=init_location(model, init_loc), init_scale=checked_init_scale(init_scale))


def checked_init_scale(init_scale: float) -> float:
    """``init_scale`` as a float, after checking it is a positive number (``ValueError`` otherwise)."""
    if isinstance(init_scale, bool) or not (isinstance(init_scale, (int, float)) and 0 < init_scale < float("inf")):
        raise ValueError(f"init_scale must be a positive number, got {init_scale!r}")
    return float(init_scale)


def init_location(model, init_loc: str | Mapping[str, torch.Tensor]):
    """The ``init_loc_fn`` of a Pyro autoguide for ``init_loc`` (:func:`autonormal`'s notes: ``"prior"``, ``"median"``
    or a mapping of site values); ``ValueError`` for an unknown name or a bad mapping."""
    if isinstance(init_loc, Mapping):
        return init_to_value(values={**latent_medians(model), **_checked_values(model, init_loc)}, fallback=init_to_sample)
    if init_loc == "prior":
        return init_to_value(values=latent_medians(model), fallback=init_to_sample)
    if init_loc == "median":
        return init_to_median
    raise ValueError(f"init_loc must be one of {sorted(INIT_LOCATIONS)} or a mapping of site values, got {init_loc!r}")


def latent_medians(model) -> dict[str, torch.Tensor]:
    """The prior median of every latent of ``model`` that is not a weight: the scales of its hierarchical priors and
    its likelihood's latents, in the default dtype."""
    return {name: prior_median(prior).to(torch.get_default_dtype()) for name, prior in model.non_weight_priors().items()}


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
