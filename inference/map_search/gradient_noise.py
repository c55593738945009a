r"""Whether a MAP fitted on minibatches ended near a stationary point: its full gradient against one minibatch's noise.

With the per-example objective :math:`\ell(\theta) = [\log p(y \mid x, \theta) + \log p(\theta)] / N` and its
estimate on a batch :math:`b` of :math:`|b|` rows, :math:`\ell_b(\theta) = [\frac{N}{|b|} \log p(y_b \mid x_b, \theta)
+ \log p(\theta)] / N`, one epoch of batches at the end point gives the full gradient :math:`\bar g = \nabla\ell`
exactly and the spread of one batch's gradient about it; their ratio

.. math::

    \rho = \frac{\lVert \bar g \rVert}{\sqrt{\frac{1}{B}\sum_{b} \lVert \nabla \ell_b - \bar g \rVert^2}}

(over the :math:`B` batches of full size) is the gradient's signal against its noise at the batch size the fit
stepped with. Far from a mode the full gradient is of the order of a batch's (:math:`\rho` near 1); where minibatch
Adam has settled it is a small fraction of the noise its steps were taken in. A run whose rate was too small or
whose epochs too few for its data ends with a :math:`\rho` several times a healthy run's, even where its objective's
trend looks flat (the rise of a slow run is as concave as a healthy one's:
:mod:`bnn.inference.map_search.minibatch_map` judges both). The batches are a permutation drawn from a generator of
their own, so the global random state is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood

NOISE_RATIO = 0.07
r"""The largest :math:`\rho` of a settled fit (:mod:`bnn.inference.map_search.minibatch_map`'s check): between the
largest of healthy fits and the smallest of broken fits that the objective's share does not flag, near their
geometric mean (``benchmarks/results/map_check.md``)."""
PERMUTATION_SEED = 0
"""The seed of the batches' permutation (fixed: the same end point gives the same ratio)."""


@dataclass(frozen=True)
class FullGradient:
    r"""The log joint over all rows at one point, its gradient and :math:`\rho` (module notes).

    Attributes
    ----------
    log_likelihood : float
        :math:`\log p(y \mid x, \theta)` over all rows.
    gradient : torch.Tensor
        :math:`\nabla_\theta [\log p(y \mid x, \theta) + \log p(\theta)]` over the judged entries (not per example).
    noise_ratio : float
        :math:`\rho` over the judged entries.
    """

    log_likelihood: float
    gradient: torch.Tensor
    noise_ratio: float


def full_gradient(model, x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, latents: dict, prior: ScaledPrior,
                  batch_size: int, judged_from: int = 0) -> FullGradient:
    r"""The :class:`FullGradient` at ``theta`` from one epoch of batches of ``batch_size`` rows (at least one full
    batch: ``batch_size`` below the rows), the entries from ``judged_from`` on judged."""
    rows = x.shape[0]
    generator = torch.Generator().manual_seed(PERMUTATION_SEED)
    point = theta.detach().clone().requires_grad_(True)
    total, likelihood_gradient = 0.0, torch.zeros_like(point)
    batch_sum, square_sum, batches = torch.zeros_like(point[judged_from:]), 0.0, 0  # of the full batches' gradients
    with torch.enable_grad():
        (prior_gradient,) = torch.autograd.grad(prior.log_prob(point), point)
        for index in torch.randperm(rows, generator=generator).split(batch_size):
            term = log_likelihood(model, x[index], y[index], point, latents)
            (part,) = torch.autograd.grad(term, point)
            likelihood_gradient, total = likelihood_gradient + part, total + term.item()
            if index.shape[0] == batch_size:
                per_example = part[judged_from:] / batch_size
                batch_sum, square_sum, batches = batch_sum + per_example, square_sum + per_example.pow(2).sum(), batches + 1
    gradient = (prior_gradient + likelihood_gradient)[judged_from:]
    mean_likelihood = likelihood_gradient[judged_from:] / rows
    spread_squared = square_sum / batches - 2 * (batch_sum / batches) @ mean_likelihood + mean_likelihood @ mean_likelihood
    spread = spread_squared.clamp(min=0).sqrt()
    mean = (gradient / rows).norm()
    return FullGradient(total, gradient, float(mean / spread) if spread > 0 else 0.0 if mean == 0 else float("inf"))
