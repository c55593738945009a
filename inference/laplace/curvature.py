r"""Curvature of the negative log-likelihood in the flat weights :math:`\theta`, for the Laplace approximation.

With :math:`f_i = f(x_i; \theta) \in \mathbb{R}^K` and :math:`\ell_i(f) = -\log p(y_i \mid f)`,

.. math::

    \nabla^2_\theta \sum_i \ell_i
    = \underbrace{\sum_i J_i^\top H_i J_i}_{\text{GGN}}
    + \sum_i \sum_k \frac{\partial \ell_i}{\partial f_{ik}} \nabla^2_\theta f_{ik},
    \qquad J_i = \frac{\partial f_i}{\partial \theta},\quad H_i = \nabla^2_f \ell_i .

The generalised Gauss-Newton (GGN) keeps the first term. :math:`H_i` is positive
semi-definite for the likelihoods here, so the GGN is too, whatever :math:`\theta`:

=============  ==========================================================
Gaussian       :math:`H_i = I_K / \sigma^2`
Bernoulli      :math:`H_i = p_i (1 - p_i)`, :math:`p_i = \mathrm{sigmoid}(f_i)`
Categorical    :math:`H_i = \mathrm{diag}(p_i) - p_i p_i^\top`, :math:`p_i = \mathrm{softmax}(f_i)`
=============  ==========================================================

The exact Hessian (automatic differentiation of :math:`\sum_i \ell_i`) adds the second
term, which vanishes where :math:`f` is linear in :math:`\theta` (no hidden layer, or
the last layer alone) and can make the Hessian indefinite elsewhere.

Data are processed in chunks sized so that a chunk's Jacobians stay within
:data:`JACOBIAN_BUDGET_BYTES`.
"""

from __future__ import annotations

from enum import Enum

import torch
from bnn.guides.flat_weights import num_weights, split_flat
from bnn.inference.progress import progress_bar
from bnn.models.likelihoods import (
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
    Likelihood,
)
from torch.func import hessian, jacrev, vmap

JACOBIAN_BUDGET_BYTES = 256 * 2**20
FULL_MATRICES_AT_PEAK = 5
"""D x D matrices the memory check charges a full or last-layer structure. Four are alive at once in
:func:`bnn.inference.laplace.fit.covariance_factor`'s triangular solve: the precision (formed in place of the curvature),
its flipped Cholesky factor, the identity and the covariance factor; the fifth covers the allocator's and LAPACK's
slack (measured: the factorisation adds 3.2-4.1 D x D float64 to the precision's own at D = 3000-1000,
``tests/inference/test_curvature.py``). Tuning the prior precision peaks lower: the curvature, its rescaled copy
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


def check_combination(hessian_type: HessianType, structure: Structure) -> None:
    """Raise ``ValueError`` for a curvature and structure that do not go together."""
    if hessian_type is HessianType.EXACT and structure is Structure.DIAG:
        raise ValueError(
            "hessian='exact' with structure='diag' is not offered (the exact Hessian's diagonal costs D "
            "Hessian-vector products); use hessian='ggn' with structure='diag', or hessian='exact' with "
            "structure='full' or 'last-layer'"
        )


def covered_from(model, structure: Structure) -> int:
    r"""Index of the first weight of :math:`\theta` the structure treats as random."""
    if structure is Structure.LAST_LAYER:
        return num_weights(model.sites) - model.sites[-2].numel - model.sites[-1].numel
    return 0


def required_bytes(structure: Structure, covered: int, itemsize: int) -> int:
    """Memory the curvature of ``covered`` weights needs at its peak, in bytes."""
    if structure is Structure.DIAG:
        return 4 * covered * itemsize
    return FULL_MATRICES_AT_PEAK * covered**2 * itemsize


def check_memory(model, structure: Structure, itemsize: int, max_memory_gib: float) -> None:
    """Raise ``ValueError`` with the numbers when ``structure`` needs more than ``max_memory_gib``."""
    covered = num_weights(model.sites) - covered_from(model, structure)
    needed = required_bytes(structure, covered, itemsize) / GIB
    if needed <= max_memory_gib:
        return
    total = num_weights(model.sites)
    last = total - covered_from(model, Structure.LAST_LAYER)
    raise ValueError(
        f"structure {structure.value!r} over {covered:,} weights needs about {FULL_MATRICES_AT_PEAK} x "
        f"{covered:,}^2 x {itemsize} bytes = {needed:.3g} GiB, above max_memory_gib={max_memory_gib:g}; "
        f"use structure='diag' (about {required_bytes(Structure.DIAG, total, itemsize) / GIB:.3g} GiB) or "
        f"'last-layer' ({last:,} weights, about {required_bytes(Structure.LAST_LAYER, last, itemsize) / GIB:.3g} "
        f"GiB), or raise max_memory_gib"
    )


def _gaussian_hessian(likelihood: GaussianLikelihood, f: torch.Tensor, latents) -> torch.Tensor:
    sigma = torch.as_tensor(likelihood.noise_scale(latents), dtype=f.dtype).reshape(())
    return torch.eye(f.shape[-1], dtype=f.dtype).expand(f.shape[0], -1, -1) / sigma**2


def _bernoulli_hessian(likelihood, f: torch.Tensor, latents) -> torch.Tensor:
    p = torch.sigmoid(f)
    return (p * (1 - p)).unsqueeze(-1)


def _categorical_hessian(likelihood, f: torch.Tensor, latents) -> torch.Tensor:
    p = torch.softmax(f, dim=-1)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)


def _heteroscedastic_fisher(likelihood: HeteroscedasticGaussianLikelihood, f: torch.Tensor, latents) -> torch.Tensor:
    r"""The Fisher information of :math:`\mathcal{N}(m, s^2)` in the outputs :math:`(m, r)`, :math:`s = \operatorname{softplus}(r)
    + s_{min}`: :math:`\operatorname{diag}(1/s^2,\ 2\,\sigma(r)^2/s^2)` per target (:math:`\sigma` the logistic function,
    the derivative of softplus). It is the Hessian of :math:`-\log p` averaged over :math:`y`; the Hessian itself is not
    positive semi-definite where a residual exceeds :math:`s`, so the GGN takes this expectation."""
    _, scale = likelihood.mean_and_scale(f)
    _, raw = f.chunk(2, dim=-1)
    return torch.diag_embed(torch.cat([scale**-2, 2 * torch.sigmoid(raw) ** 2 / scale**2], dim=-1))


OUTPUT_HESSIANS = {
    GaussianLikelihood: _gaussian_hessian,
    BernoulliLikelihood: _bernoulli_hessian,
    CategoricalLikelihood: _categorical_hessian,
    HeteroscedasticGaussianLikelihood: _heteroscedastic_fisher,
}


def check_ggn_supported(likelihood: Likelihood) -> None:
    """Raise ``ValueError`` when the GGN has no closed-form :math:`H_i` for ``likelihood``."""
    if type(likelihood) not in OUTPUT_HESSIANS:
        names = sorted(cls.__name__ for cls in OUTPUT_HESSIANS)
        raise ValueError(
            f"the GGN curvature knows the likelihoods {names}, not {type(likelihood).__name__}; "
            "use hessian='exact'"
        )


def output_hessian(likelihood: Likelihood, f: torch.Tensor, latents: dict[str, torch.Tensor]) -> torch.Tensor:
    r""":math:`H_i = \nabla^2_f[-\log p(y_i \mid f)]` at ``f`` of shape ``(n, K)``, as ``(n, K, K)`` (its expectation
    over :math:`y`, the Fisher, for the heteroscedastic Gaussian)."""
    check_ggn_supported(likelihood)
    return OUTPUT_HESSIANS[type(likelihood)](likelihood, f, latents)


def output_jacobian(model, x: torch.Tensor, theta: torch.Tensor, start: int) -> torch.Tensor:
    r""":math:`\partial f(x_i; \theta) / \partial \theta_{start:}` for every row of ``x``, shape ``(n, K, D - start)``."""
    fixed = theta[:start]

    def output(covered: torch.Tensor, x_row: torch.Tensor) -> torch.Tensor:
        return model.forward(x_row.unsqueeze(0), split_flat(model.sites, torch.cat([fixed, covered])))[0]

    return vmap(jacrev(output), in_dims=(None, 0))(theta[start:].detach(), x)


def _exact_hessian(model, x, y, theta, latents, start: int) -> torch.Tensor:
    fixed = theta[:start]

    def negative_log_likelihood(covered: torch.Tensor) -> torch.Tensor:
        values = {**split_flat(model.sites, torch.cat([fixed, covered])), **latents}
        return -model.observation_distribution(x, values).log_prob(y).sum()

    return hessian(negative_log_likelihood)(theta[start:].detach())


def rows_per_chunk(model, covered: int, itemsize: int) -> int:
    """Data rows per chunk so that per-row Jacobians and activations fit :data:`JACOBIAN_BUDGET_BYTES`."""
    width = model.in_features + sum(model.hidden) + model.out_features
    return max(1, JACOBIAN_BUDGET_BYTES // (covered * width * itemsize))


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
    covered = theta.shape[0] - start
    check_combination(hessian_type, structure)
    diagonal = structure is Structure.DIAG
    total = theta.new_zeros(covered if diagonal else (covered, covered))
    rows = rows_per_chunk(model, covered, theta.element_size())
    full_values = split_flat(model.sites, theta.detach())
    chunks = range(0, x.shape[0], rows)
    for begin in progress_bar(chunks, desc=f"{hessian_type.value} curvature", enabled=progress, leave=False):
        x_chunk, y_chunk = x[begin : begin + rows], y[begin : begin + rows]
        if hessian_type is HessianType.EXACT:
            total += _exact_hessian(model, x_chunk, y_chunk, theta, latents, start)
            continue
        jacobian = output_jacobian(model, x_chunk, theta, start)
        with torch.no_grad():
            h_jacobian = output_hessian(model.likelihood, model.forward(x_chunk, full_values), latents) @ jacobian
        if diagonal:
            total += (jacobian * h_jacobian).sum((0, 1))
        else:
            total.addmm_(jacobian.reshape(-1, covered).T, h_jacobian.reshape(-1, covered))
    return total
