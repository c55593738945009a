"""The structure of a Laplace fit that names none: the full GGN where it fits in memory, else the Kronecker-factored
one where the network allows it."""

from __future__ import annotations

import torch
from bnn.guides.flat_weights import num_weights
from bnn.inference.curvature.kron_curvature import check_kron_supported
from bnn.inference.laplace.curvature import GIB, HessianType, Structure, required_bytes


def choose_structure(model, x: torch.Tensor, hessian: HessianType, itemsize: int,
                     max_memory_gib: float) -> tuple[Structure, str]:
    """``full`` when its curvature fits ``max_memory_gib``; else ``kron`` when ``hessian`` is the GGN, every layer
    of the network has Kronecker factors (written with :mod:`bnn.models.layers`, or a module's ``nn.Linear`` and
    ``nn.Conv2d``: :func:`check_kron_supported` on ``x``) and its factors fit; else ``full`` (whose memory check then
    refuses, naming the alternatives). Also the reason, for the record."""
    weights = num_weights(model.sites)
    full = required_bytes(Structure.FULL, weights, itemsize) / GIB
    if full <= max_memory_gib:
        return Structure.FULL, (f"default: the full GGN over {weights:,} weights needs about {full:.3g} GiB, within "
                                f"max_memory_gib={max_memory_gib:g}")
    too_big = f"the full GGN over {weights:,} weights would need about {full:.3g} GiB, above max_memory_gib={max_memory_gib:g}"
    if hessian is not HessianType.GGN:
        return Structure.FULL, f"default: {too_big}, and hessian={hessian.value!r} has no Kronecker factors"
    try:
        check_kron_supported(model, x)
    except ValueError as error:
        return Structure.FULL, f"default: {too_big}, and the network cannot take 'kron' ({error})"
    kron = required_bytes(Structure.KRON, weights, itemsize, model) / GIB
    if kron > max_memory_gib:
        return Structure.FULL, f"default: {too_big}, and so would the Kronecker-factored GGN ({kron:.3g} GiB)"
    return Structure.KRON, (f"default: {too_big}; every layer has Kronecker factors, so the Kronecker-factored GGN "
                            f"(about {kron:.3g} GiB)")
