r"""Curvature of the negative log-likelihood in the flat weights :math:`\theta`, for the Laplace approximation.

With :math:`f_i = f(x_i; \theta) \in \mathbb{R}^K` and :math:`\ell_i(f) = -\log p(y_i \mid f)`,

.. math::

    \nabla^2_\theta \sum_i \ell_i
    = \underbrace{\sum_i J_i^\top H_i J_i}_{\text{GGN}}
    + \sum_i \sum_k \frac{\partial \ell_i}{\partial f_{ik}} \nabla^2_\theta f_{ik},
    \qquad J_i = \frac{\partial f_i}{\partial \theta},\quad H_i = \nabla^2_f \ell_i .

The generalised Gauss-Newton (GGN) keeps the first term (:mod:`bnn.inference.curvature.output_curvature`, shared with
the MAP fit's Gauss-Newton polish); it is positive semi-definite whatever :math:`\theta`.

The exact Hessian (automatic differentiation of :math:`\sum_i \ell_i`) adds the second
term, which vanishes where :math:`f` is linear in :math:`\theta` (no hidden layer, or
the last layer alone) and can make the Hessian indefinite elsewhere.

Data are processed in chunks sized so that a chunk's Jacobians stay within
:data:`bnn.inference.curvature.output_curvature.JACOBIAN_BUDGET_BYTES`.
"""

from __future__ import annotations

from enum import Enum

import torch
from bnn.guides.flat_weights import num_weights, split_flat
from bnn.inference.curvature.output_curvature import (  # noqa: F401 - re-exported: the Laplace curvature's public names
    OUTPUT_HESSIANS,
    check_ggn_supported,
    gauss_newton_matrix,
    output_hessian,
    output_jacobian,
    rows_per_chunk,
)
from torch.func import hessian

from bnn.runtime.progress import progress_bar

FULL_MATRICES_AT_PEAK = 5
"""D x D matrices the memory check charges a full, last-layer or subnetwork structure. Four are alive at once in
:func:`bnn.inference.laplace.fit.covariance_factor`'s triangular solve: the precision (formed in place of the curvature),
its flipped Cholesky factor, the identity and the covariance factor; the fifth covers the allocator's and LAPACK's
slack (a test checks that the factorisation adds at most four to the precision's own:
``tests/inference/laplace/test_curvature.py``). Tuning the prior precision peaks lower: the curvature, its rescaled copy
and ``eigvalsh``'s work copy."""
GIB = 2**30


class HessianType(str, Enum):
    """Which curvature of the negative log-likelihood the Laplace approximation uses."""

    GGN = "ggn"
    r"""Generalised Gauss-Newton :math:`\sum_i J_i^\top H_i J_i`: positive semi-definite by construction."""
    EXACT = "exact"
    """The Hessian by automatic differentiation; can be indefinite, then the fit refuses."""


class Structure(str, Enum):
    """Which entries of the posterior precision are kept."""

    FULL = "full"
    r"""The dense :math:`D \times D` precision over every weight: :math:`O(D^2)` memory."""
    DIAG = "diag"
    """Its diagonal only: :math:`O(D)` memory, weights independent a posteriori."""
    LAST_LAYER = "last-layer"
    """Dense over the last layer's weights and bias; every other weight stays at its MAP value."""
    KRON = "kron"
    r"""Kronecker-factored per layer (KFAC, :mod:`bnn.inference.curvature.kron_curvature`): a weight block
    :math:`G \otimes A` and a bias block :math:`G` per layer, layers independent; :math:`O(d_{in}^2 + d_{out}^2)` memory
    per layer. Needs every layer written with :func:`bnn.models.layers.linear` or :func:`~bnn.models.layers.conv`, or,
    for a module's network (:func:`bnn.models.from_module`), its ``nn.Linear`` and ``nn.Conv2d`` layers
    (:mod:`bnn.inference.curvature.module_layers`)."""
    SUBNETWORK = "subnetwork"
    r"""Dense over the ``subnetwork_size`` weights of largest marginal variance under the diagonal Laplace
    approximation; every other weight stays at its MAP value (Daxberger et al. 2021,
    :mod:`bnn.inference.laplace.subnetwork`). GGN only; :math:`O(D_S^2)` memory."""


def check_combination(hessian_type: HessianType, structure: Structure) -> None:
    """Raise ``ValueError`` for a curvature and structure that do not go together."""
    if hessian_type is HessianType.EXACT and structure is Structure.KRON:
        raise ValueError("hessian='exact' with structure='kron' is not offered (KFAC factors the GGN); use hessian='ggn' "
                         "with structure='kron', or hessian='exact' with structure='full' or 'last-layer'")
    if hessian_type is HessianType.EXACT and structure is Structure.SUBNETWORK:
        raise ValueError("hessian='exact' with structure='subnetwork' is not offered (the weights are chosen by the "
                         "GGN's diagonal); use hessian='ggn' with structure='subnetwork', or hessian='exact' with "
                         "structure='full' or 'last-layer'")
    if hessian_type is HessianType.EXACT and structure is Structure.DIAG:
        raise ValueError(
            "hessian='exact' with structure='diag' is not offered (the exact Hessian's diagonal costs D "
            "Hessian-vector products); use hessian='ggn' with structure='diag', or hessian='exact' with "
            "structure='full' or 'last-layer'"
        )


def covered_from(model, structure: Structure) -> int:
    r"""Index of the first weight of :math:`\theta` the structure treats as random."""
    if structure is Structure.LAST_LAYER:
        return num_weights(model.sites) - num_weights(model.output_sites())
    return 0


def kron_factor_entries(model) -> int:
    r""":math:`\sum_l d_{in,l}^2 + d_{out,l}^2` over the layers (a weight site of shape ``(d_out, *d_in)``): the
    entries of the Kronecker factors, each stored with its eigendecomposition."""
    return sum(site.shape[0] ** 2 + site.shape[1:].numel() ** 2 for site in model.sites if len(site.shape) >= 2)


def required_bytes(structure: Structure, covered: int, itemsize: int, model=None) -> int:
    """Memory the curvature of ``covered`` weights needs at its peak, in bytes (``model`` for ``kron``: its factors,
    their eigenvectors and one Jacobian-sized work copy per layer)."""
    if structure is Structure.KRON:
        return 3 * kron_factor_entries(model) * itemsize
    if structure is Structure.DIAG:
        return 4 * covered * itemsize
    return FULL_MATRICES_AT_PEAK * covered**2 * itemsize


def check_memory(model, structure: Structure, itemsize: int, max_memory_gib: float, covered: int | None = None) -> None:
    """Raise ``ValueError`` with the numbers when ``structure`` over ``covered`` weights (by default those from
    :func:`covered_from` on; a subnetwork's size) needs more than ``max_memory_gib``."""
    covered = num_weights(model.sites) - covered_from(model, structure) if covered is None else covered
    needed = required_bytes(structure, covered, itemsize, model) / GIB
    if needed <= max_memory_gib:
        return
    total = num_weights(model.sites)
    last = total - covered_from(model, Structure.LAST_LAYER)
    dense = structure in (Structure.FULL, Structure.LAST_LAYER, Structure.SUBNETWORK)
    how = f"{FULL_MATRICES_AT_PEAK} x {covered:,}^2 x {itemsize} bytes = " if dense else ""
    smaller = "a smaller subnetwork_size, " if structure is Structure.SUBNETWORK else ""
    raise ValueError(
        f"structure {structure.value!r} over {covered:,} weights needs about {how}{needed:.3g} GiB, above "
        f"max_memory_gib={max_memory_gib:g}; "
        f"use {smaller}structure='kron' (about {required_bytes(Structure.KRON, total, itemsize, model) / GIB:.3g} GiB, for a "
        f"network of linear and convolutional layers), "
        f"'diag' (about {required_bytes(Structure.DIAG, total, itemsize) / GIB:.3g} GiB) or "
        f"'last-layer' ({last:,} weights, about {required_bytes(Structure.LAST_LAYER, last, itemsize) / GIB:.3g} "
        f"GiB), or raise max_memory_gib"
    )


def _exact_hessian(model, x, y, theta, latents, start: int) -> torch.Tensor:
    fixed = theta[:start]

    def negative_log_likelihood(covered: torch.Tensor) -> torch.Tensor:
        values = {**split_flat(model.sites, torch.cat([fixed, covered])), **latents}
        return -model.observation_distribution(x, values).log_prob(y).sum()

    return hessian(negative_log_likelihood)(theta[start:].detach())


def likelihood_curvature(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    theta: torch.Tensor,
    latents: dict[str, torch.Tensor],
    *,
    hessian_type: HessianType,
    structure: Structure,
    progress: bool = False,
) -> torch.Tensor:
    r"""The curvature of :math:`-\log p(y \mid x, \theta)` over the weights ``structure`` covers.

    Parameters
    ----------
    theta : torch.Tensor
        The flat weights, shape ``(D,)``, usually :math:`\theta_{MAP}`.
    latents : dict
        Values of the likelihood's latent sites held fixed (``{"sigma": ...}`` or ``{}``).

    Returns
    -------
    torch.Tensor
        ``(D_c, D_c)`` for ``full`` and ``last-layer``, the diagonal ``(D_c,)`` for ``diag``.
    """
    start = covered_from(model, structure)
    check_combination(hessian_type, structure)
    if hessian_type is HessianType.GGN:
        return gauss_newton_matrix(model, x, theta, latents, start=start, diagonal=structure is Structure.DIAG,
                                   progress=progress)
    covered = theta.shape[0] - start
    total = theta.new_zeros((covered, covered))
    rows = rows_per_chunk(model, covered, theta.element_size())
    chunks = range(0, x.shape[0], rows)
    for begin in progress_bar(chunks, desc="exact curvature", enabled=progress, leave=False):
        total += _exact_hessian(model, x[begin : begin + rows], y[begin : begin + rows], theta, latents, start)
    return total
