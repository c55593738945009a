r"""MacKay's evidence framework: the prior precision and the noise set by the Laplace evidence, the MAP refitted.

At :math:`\theta_{MAP}` the Laplace evidence (:mod:`bnn.inference.laplace.evidence`) is stationary in the prior
precision multiplier :math:`\alpha` at :math:`\alpha = \gamma / \theta^\top P \theta` and, for a Gaussian likelihood
with GGN :math:`H = G_1 / \sigma^2` over :math:`nK` targets, in the noise at

.. math::

    \sigma^2 = \frac{\sum_{i,k} (y_{ik} - f_{ik})^2}{nK - \gamma},\qquad
    \gamma = \sum_i \frac{e_i}{e_i + \alpha}

(MacKay 1992; :math:`e_i` the eigenvalues of :math:`P^{-1/2} H P^{-1/2}`, :math:`\gamma` the number of
well-determined parameters). The maximum-likelihood noise divides by :math:`nK` instead, and collapses toward zero
with the MAP when the network can interpolate its training data (455 rows and 751 weights on Boston housing): the
evidence charges the :math:`\gamma` parameters the fit used. The rounds alternate (1) :math:`\alpha` maximising the
evidence at :math:`\theta_{MAP}` and :math:`\sigma` (exactly, :func:`~bnn.inference.laplace.evidence.optimal_prior_multiplier`),
(2) :math:`\sigma` as above (a learned noise only), (3) :math:`\theta_{MAP}` refitted under :math:`\alpha P` and
:math:`\sigma` from the previous one, until :math:`\alpha` and :math:`\sigma` change by less than
:data:`RELATIVE_CHANGE`; this is laplace-torch's ``optimize_prior_precision(method="marglik")`` with the noise
included, iterated with the MAP as MacKay does. With ``structure="last-layer"``, :math:`\gamma` counts the last
layer's parameters only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.laplace.curvature import HessianType, Structure, likelihood_curvature
from bnn.inference.laplace.evidence import optimal_prior_multiplier, relative_eigenvalues
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_estimate import MapEstimate, find_map

MAX_ROUNDS = 10
RELATIVE_CHANGE = 1e-3
UNSETTLED_FIX = "raise map_max_iter (each round refits the MAP), or pass tune_prior_precision=False"


@dataclass(frozen=True)
class EvidenceTuning:
    """Where the rounds ended: the MAP under the chosen values, :math:`\\alpha`, the rounds and whether they settled."""

    estimate: MapEstimate
    multiplier: float
    rounds: int
    converged: bool


def _noise(model, x, y, theta: torch.Tensor, gamma: float) -> torch.Tensor:
    r""":math:`\sigma` of the module notes at ``theta`` (at least one degree of freedom is left to the noise)."""
    with torch.no_grad():
        f = model.forward(x, split_flat(model.sites, theta))
        squares = (f - y.reshape(f.shape)).pow(2).sum()
    return (squares / max(f.numel() - gamma, 1.0)).sqrt()


def tune_by_evidence(model, x, y, start_estimate: MapEstimate, start: int, structure: Structure, *, tolerance: float,
                     max_iter: int, progress: bool) -> EvidenceTuning:
    r"""Run the rounds of the module notes from ``start_estimate`` (Adam's iterate, its noise at maximum likelihood).

    ``start`` is the first covered entry of :math:`\theta`; ``tolerance`` and ``max_iter`` go to each MAP refit.
    """
    estimate, multiplier = start_estimate, 1.0
    learned = "sigma" in start_estimate.latents
    noise = start_estimate.latents.get("sigma")
    estimate = find_map(model, x, y, steps=0, lr=1.0, tolerance=tolerance, max_iter=max_iter, progress=progress,
                        judged_from=start, init=estimate.theta, noise=noise)
    for rounds in range(1, MAX_ROUNDS + 1):
        base = prior_curvature(model, estimate.theta, start)
        curvature = likelihood_curvature(model, x, y, estimate.theta, estimate.latents, hessian_type=HessianType.GGN,
                                         structure=structure)
        eigenvalues = relative_eigenvalues(curvature, base)
        del curvature
        theta = estimate.theta[start:]
        new_multiplier = optimal_prior_multiplier(eigenvalues, float((base * theta**2).sum()))
        gamma = float((eigenvalues / (eigenvalues + new_multiplier)).sum())
        new_noise = _noise(model, x, y, estimate.theta, gamma) if learned else None
        moved = abs(math.log(new_multiplier / multiplier))
        if learned:
            moved = max(moved, abs(math.log(float(new_noise / noise))))
        multiplier, noise = new_multiplier, new_noise
        estimate = find_map(model, x, y, steps=0, lr=1.0, tolerance=tolerance, max_iter=max_iter, progress=progress,
                            judged_from=start, init=estimate.theta, noise=noise, prior_weight=multiplier)
        if moved < RELATIVE_CHANGE:
            return EvidenceTuning(estimate, multiplier, rounds, True)
    return EvidenceTuning(estimate, multiplier, MAX_ROUNDS, False)
