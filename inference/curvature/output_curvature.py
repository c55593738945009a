r"""The generalised Gauss-Newton (GGN) matrix of the negative log-likelihood, shared by the MAP fit and Laplace.

With :math:`f_i = f(x_i; \theta) \in \mathbb{R}^K`, :math:`J_i = \partial f_i / \partial \theta` and
:math:`H_i = \nabla^2_f[-\log p(y_i \mid f_i)]`,

.. math::

    G(\theta) = \sum_i J_i^\top H_i J_i ,

the Hessian of :math:`-\log p(y \mid x, \theta)` without the term in the network's own second derivatives.
:math:`H_i` is positive semi-definite for the likelihoods here, so :math:`G` is too, whatever :math:`\theta`:

=============  ==========================================================
Gaussian       :math:`H_i = I_K / \sigma^2`
Bernoulli      :math:`H_i = p_i (1 - p_i)`, :math:`p_i = \mathrm{sigmoid}(f_i)`
Categorical    :math:`H_i = \mathrm{diag}(p_i) - p_i p_i^\top`, :math:`p_i = \mathrm{softmax}(f_i)`
=============  ==========================================================

and the heteroscedastic Gaussian takes its Fisher information. Data are processed in chunks sized so that a
chunk's Jacobians stay within :data:`JACOBIAN_BUDGET_BYTES`.
"""

from __future__ import annotations

import torch
from bnn.guides.flat_weights import split_flat
from bnn.models.likelihoods import (
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
    Likelihood,
)
from torch.func import jacrev, vmap

from bnn.runtime.progress import progress_bar

JACOBIAN_BUDGET_BYTES = 256 * 2**20


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



def rows_per_chunk(model, covered: int, itemsize: int) -> int:
    """Data rows per chunk so that per-row Jacobians and activations fit :data:`JACOBIAN_BUDGET_BYTES`."""
    width = sum(model.activation_widths())
    return max(1, JACOBIAN_BUDGET_BYTES // (covered * width * itemsize))


def gauss_newton_matrix(model, x: torch.Tensor, theta: torch.Tensor, latents: dict[str, torch.Tensor], *, start: int = 0,
                        diagonal: bool = False, subset: torch.Tensor | None = None,
                        progress: bool = False) -> torch.Tensor:
    r""":math:`G(\theta)` over the entries of :math:`\theta` from ``start`` on (the rest held fixed), or its block
    :math:`G_{SS} = \sum_i J_{i,S}^\top H_i J_{i,S}` over the entries ``subset`` of those.

    Parameters
    ----------
    theta : torch.Tensor
        The flat weights, shape ``(D,)``.
    latents : dict
        Values of the likelihood's latent sites (``{"sigma": ...}`` or ``{}``).
    diagonal : bool
        Return the diagonal ``(D - start,)`` only (never forming the matrix).
    subset : torch.Tensor, optional
        Positions, counted from ``start``, of the entries whose block is formed (a subnetwork): each chunk's Jacobian
        is taken over every entry from ``start`` on, then cut to these columns.

    Returns
    -------
    torch.Tensor
        ``(D - start, D - start)``, its diagonal, or ``(len(subset), len(subset))``.
    """
    check_ggn_supported(model.likelihood)
    width = theta.shape[0] - start
    covered = width if subset is None else subset.numel()
    total = theta.new_zeros(covered if diagonal else (covered, covered))
    rows = rows_per_chunk(model, width, theta.element_size())
    values = split_flat(model.sites, theta.detach())
    chunks = range(0, x.shape[0], rows)
    for begin in progress_bar(chunks, desc="ggn curvature", enabled=progress, leave=False):
        x_chunk = x[begin : begin + rows]
        jacobian = output_jacobian(model, x_chunk, theta, start)
        jacobian = jacobian if subset is None else jacobian[..., subset]
        with torch.no_grad():
            h_jacobian = output_hessian(model.likelihood, model.forward(x_chunk, values), latents) @ jacobian
        if diagonal:
            total += (jacobian * h_jacobian).sum((0, 1))
        else:
            total.addmm_(jacobian.reshape(-1, covered).T, h_jacobian.reshape(-1, covered))
    return total
