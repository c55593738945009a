r"""The prior precision chosen by the Laplace evidence at a MAP held fixed: the post-hoc tuning of a Laplace fit whose
MAP was fitted on minibatches (:mod:`bnn.inference.map_search.minibatch_map`), where refitting the MAP at each
candidate, as the full-batch fit's evidence search does, would cost a training each.

With the MAP :math:`\theta` (fitted at the model's own prior, :math:`\alpha = 1`), the likelihood's curvature
:math:`H` there and the prior's diagonal base precision :math:`P`, the evidence of the multiplier :math:`\alpha` is

.. math::

    \log Z(\alpha) = \log p(y \mid x, \theta) + \log\mathcal{N}(\theta; 0, (\alpha P)^{-1})
    + \frac{D}{2}\log 2\pi - \frac12\log\det(H + \alpha P)

(MacKay 1992; laplace-torch's ``optimize_prior_precision(method="marglik")`` maximises the same), maximised over
:math:`\log\alpha` by the search of :mod:`bnn.inference.curvature.evidence_search`. The curvature is formed once:
for a dense :math:`H`, :math:`\log\det(H + \alpha P) = \log\det P + \sum_i \log(\mu_i + \alpha)` with :math:`\mu_i`
the eigenvalues of :math:`P^{-1/2} H P^{-1/2}`; for a diagonal one, :math:`\sum_k \log(h_k + \alpha p_k)`; the
Kronecker-factored one is formed again at each candidate. A learned noise stays at its maximum-likelihood value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from bnn.inference.curvature.evidence import gaussian_log_prior, laplace_log_marginal_likelihood
from bnn.inference.curvature.evidence_search import maximize_on_log_scale
from bnn.inference.curvature.kron_curvature import kron_posterior
from bnn.inference.laplace.curvature import Structure, likelihood_curvature
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_search.map_estimate import MapEstimate


@dataclass(frozen=True)
class PosthocChoice:
    """The multiplier the evidence chose at the fixed MAP, its evaluations, and whether a maximum was bracketed."""

    multiplier: float
    evaluations: int
    bracketed: bool


def evidence_of_multiplier(model, x: torch.Tensor, y: torch.Tensor, estimate: MapEstimate, start: int, hessian_type,
                           structure: Structure, progress: bool) -> Callable[[float], float]:
    r""":math:`\alpha \mapsto \log Z(\alpha)` at the fixed MAP (module notes), its curvature formed once."""
    base = prior_curvature(model, estimate.theta, start)
    theta = estimate.theta[start:]
    dim = theta.numel()

    def evidence(multiplier: float, logdet: float) -> float:
        log_prior = gaussian_log_prior(theta, multiplier * base)
        return laplace_log_marginal_likelihood(estimate.log_likelihood, log_prior, logdet, dim)

    if structure is Structure.KRON:
        return lambda multiplier: evidence(multiplier, kron_posterior(
            model, x, estimate.theta, estimate.latents, multiplier * base).logdet_precision())
    curvature = likelihood_curvature(model, x, y, estimate.theta, estimate.latents, hessian_type=hessian_type,
                                     structure=structure, progress=progress)
    if curvature.dim() == 1:
        return lambda multiplier: evidence(multiplier, float((curvature + multiplier * base).log().sum()))
    root = base.rsqrt()
    whitened = torch.linalg.eigvalsh(root[:, None] * curvature * root[None, :])
    log_base = float(base.log().sum())
    return lambda multiplier: evidence(multiplier, log_base + float((whitened + multiplier).clamp_min(0).log().sum()))


def posthoc_multiplier(model, x: torch.Tensor, y: torch.Tensor, estimate: MapEstimate, start: int, hessian_type,
                       structure: Structure, progress: bool) -> PosthocChoice:
    r"""The multiplier :math:`\alpha` of the prior precision that maximises the evidence at the fixed MAP."""
    evidence = evidence_of_multiplier(model, x, y, estimate, start, hessian_type, structure, progress)
    result = maximize_on_log_scale(lambda log_multiplier: evidence(math.exp(log_multiplier)),
                                   math.log(estimate.multiplier))
    return PosthocChoice(math.exp(result.point), result.evaluations, result.bracketed)
