r"""The prior precision chosen by the Laplace evidence at a MAP held fixed: the post-hoc tuning of a Laplace fit whose
MAP was fitted on minibatches (:mod:`bnn.inference.map_search.minibatch_map`) or polished by L-BFGS, where refitting
the MAP at each candidate, as the Levenberg-Marquardt fit's evidence search does, would cost a training, or a
curvature its polish does not form, each.

With the MAP :math:`\theta` (fitted at the model's own prior, :math:`\alpha = 1`), the likelihood's curvature
:math:`H` there and the prior's diagonal base precision :math:`P`, the evidence of the multiplier :math:`\alpha` is

.. math::

    \log Z(\alpha) = \log p(y \mid x, \theta) + \log\mathcal{N}(\theta; 0, (\alpha P)^{-1})
    + \frac{D}{2}\log 2\pi - \frac12\log\det(H + \alpha P)

(MacKay 1992; laplace-torch's ``optimize_prior_precision(method="marglik")`` maximises the same), maximised over
:math:`\log\alpha` by the search of :mod:`bnn.inference.curvature.evidence_search`. The curvature is formed once:
for a dense :math:`H`, :math:`\log\det(H + \alpha P) = \log\det P + \sum_i \log(\mu_i + \alpha)` with :math:`\mu_i`
the eigenvalues of :math:`P^{-1/2} H P^{-1/2}`; for a diagonal one, :math:`\sum_k \log(h_k + \alpha p_k)`; the
Kronecker-factored one is formed again at each candidate. A learned noise stays where the MAP fit put it (its
maximum-likelihood value on minibatches, the evidence's at :math:`\alpha = 1` in full batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from bnn.guides.flat_weights import num_weights
from bnn.inference.curvature.evidence import gaussian_log_prior, laplace_log_marginal_likelihood
from bnn.inference.curvature.evidence_search import maximize_on_log_scale
from bnn.inference.curvature.gauss_newton import uses_gauss_newton
from bnn.inference.curvature.kron_curvature import kron_posterior
from bnn.inference.laplace.curvature import Structure
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_search.map_estimate import MapEstimate


def refits_affordable(model, rows: int) -> bool:
    """Whether the full-batch evidence search over the prior precision refits the MAP at each candidate rather than
    holding it fixed (this module): where the MAP's polish of all its weights is Levenberg-Marquardt
    (:func:`~bnn.inference.curvature.gauss_newton.uses_gauss_newton`), which forms the curvature at every step anyway;
    an L-BFGS polish does not, and each refit would add one to hundreds of its iterations."""
    return uses_gauss_newton(model, rows, num_weights(model.sites))


@dataclass(frozen=True)
class PosthocChoice:
    """The multiplier the evidence chose at the fixed MAP, its evaluations, and whether a maximum was bracketed."""

    multiplier: float
    evaluations: int
    bracketed: bool


def evidence_of_multiplier(model, x: torch.Tensor, estimate: MapEstimate, start: int, structure: Structure,
                           curvature: torch.Tensor | None) -> Callable[[float], float]:
    r""":math:`\alpha \mapsto \log Z(\alpha)` at the fixed MAP (module notes), from the likelihood's ``curvature`` there
    (dense or diagonal, left unchanged; ``None`` for the Kronecker-factored one, formed at each :math:`\alpha`)."""
    base = prior_curvature(model, estimate.theta, start)
    theta = estimate.theta[start:]
    dim = theta.numel()

    def evidence(multiplier: float, logdet: float) -> float:
        log_prior = gaussian_log_prior(theta, multiplier * base)
        return laplace_log_marginal_likelihood(estimate.log_likelihood, log_prior, logdet, dim)

    if structure is Structure.KRON:
        return lambda multiplier: evidence(multiplier, kron_posterior(
            model, x, estimate.theta, estimate.latents, multiplier * base).logdet_precision())
    if curvature.dim() == 1:
        return lambda multiplier: evidence(multiplier, float((curvature + multiplier * base).log().sum()))
    root = base.rsqrt()
    whitened = torch.linalg.eigvalsh(root[:, None] * curvature * root[None, :])
    log_base = float(base.log().sum())
    return lambda multiplier: evidence(multiplier, log_base + float((whitened + multiplier).clamp_min(0).log().sum()))


def posthoc_multiplier(model, x: torch.Tensor, estimate: MapEstimate, start: int, structure: Structure,
                       curvature: torch.Tensor | None) -> PosthocChoice:
    r"""The multiplier :math:`\alpha` of the prior precision that maximises the evidence at the fixed MAP, from the
    likelihood's ``curvature`` there (:func:`evidence_of_multiplier`)."""
    evidence = evidence_of_multiplier(model, x, estimate, start, structure, curvature)
    result = maximize_on_log_scale(lambda log_multiplier: evidence(math.exp(log_multiplier)),
                                   math.log(estimate.multiplier))
    return PosthocChoice(math.exp(result.point), result.evaluations, result.bracketed)
