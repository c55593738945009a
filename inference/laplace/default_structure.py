"""The structure of a Laplace fit that names none: the full GGN where it fits in memory and is cheap, else the
Kronecker-factored one where the network allows it."""

from __future__ import annotations

import torch
from bnn.guides.flat_weights import num_weights
from bnn.inference.curvature.gauss_newton import uses_gauss_newton
from bnn.inference.curvature.kron_curvature import check_kron_supported
from bnn.inference.laplace.curvature import GIB, HessianType, Structure, required_bytes


def choose_structure(model, x: torch.Tensor, hessian: HessianType, itemsize: int, max_memory_gib: float, *,
                     tempered: bool = False) -> tuple[Structure, str]:
    """``full`` when its curvature fits ``max_memory_gib`` and is cheap: the MAP's polish forms it at every step anyway
    (Levenberg-Marquardt, :func:`~bnn.inference.curvature.gauss_newton.uses_gauss_newton`), or the fit is
    ``tempered`` (a tempered Laplace has no ``kron``). Else ``kron`` when ``hessian`` is the GGN, every layer of the
    network has Kronecker factors (written with :mod:`bnn.models.layers`, or a module's ``nn.Linear`` and
    ``nn.Conv2d``: :func:`check_kron_supported` on ``x``) and its factors fit; else ``full`` (whose memory check then
    refuses where it does not fit, naming the alternatives). Also the reason, for the record."""
    weights = num_weights(model.sites)
    full = required_bytes(Structure.FULL, weights, itemsize) / GIB
    fits = f"the full GGN over {weights:,} weights needs about {full:.3g} GiB, within max_memory_gib={max_memory_gib:g}"
    if full <= max_memory_gib:
        if tempered or uses_gauss_newton(model, x.shape[0], weights):
            return Structure.FULL, f"default: {fits}"
        why = (f"{fits} but costs {x.shape[0]:,} rows x {model.out_features} outputs x {weights:,}^2 weights, more "
               f"than a Levenberg-Marquardt step of the MAP's polish may")
    else:
        why = (f"the full GGN over {weights:,} weights would need about {full:.3g} GiB, above "
               f"max_memory_gib={max_memory_gib:g}")
    if hessian is not HessianType.GGN:
        return Structure.FULL, f"default: {why}, and hessian={hessian.value!r} has no Kronecker factors"
    try:
        check_kron_supported(model, x)
    except ValueError as error:
        return Structure.FULL, f"default: {why}, and the network cannot take 'kron' ({error})"
    kron = required_bytes(Structure.KRON, weights, itemsize, model) / GIB
    if kron > max_memory_gib:
        return Structure.FULL, f"default: {why}, and the Kronecker-factored GGN would not fit ({kron:.3g} GiB)"
    return Structure.KRON, (f"default: {why}; every layer has Kronecker factors, so the Kronecker-factored GGN "
                            f"(about {kron:.3g} GiB)")
