r"""Bayesian gradient descent (``bgd``; Zeno et al. 2018): online variational Bayes, the mean-field Gaussian updated
in closed form minibatch by minibatch, with no task boundary in its rule.

Each minibatch :math:`\mathcal{B}` is new data for online Bayes, :math:`q_{\text{new}} \propto
p(\mathcal{B} \mid W)\, q_{\text{old}}`. Zeno et al. solve the variational step's fixed-point equations to first
order in the step: with :math:`L(W) = -\log p(\mathcal{B} \mid W)` (summed over the minibatch) and
:math:`W = \mu + \sigma \odot \epsilon`, :math:`\epsilon \sim \mathcal{N}(0, I)`,

.. math::

    \mu_k &\leftarrow \mu_k - \eta\, \sigma_k^2\, \mathbb{E}_\epsilon\!\left[\frac{\partial L}{\partial w_k}\right], \\
    \sigma_k &\leftarrow \sigma_k \sqrt{1 + h_k^2} - \sigma_k h_k, \qquad
    h_k = \tfrac12 \sigma_k\, \mathbb{E}_\epsilon\!\left[\frac{\partial L}{\partial w_k}\, \epsilon_k\right],

the expectations estimated by ``mc_samples`` draws (the paper's rule, as in its public code) taken in antithetic
pairs :math:`(\epsilon, -\epsilon)`: still unbiased, and the part :math:`\epsilon\, \nabla L(\mu)` of
:math:`\epsilon \odot \nabla L`, whose variance grows with the gradient at the mean, cancels within each pair.
For a quadratic :math:`L` of curvature :math:`a_k` in :math:`w_k` the update gives :math:`\sigma_k^{-2}
\leftarrow \sigma_k^{-2} + a_k + O(a_k^2 \sigma_k^2)`, Bayes' rule to first order: many small minibatches
compose to the exact posterior. :math:`\eta` (``mean_eta``) is 1 in the theory.

The first task starts at means drawn from :math:`\mathcal{N}(0, 0.1^2)` and every scale at ``std_init``
(:func:`first_scale`): :math:`q_0` is the prior (the first prior :math:`\mathcal{N}(0, s^2)` is not used). A task
is learnt by ``steps`` updates on minibatches of ``batch_size`` rows (the whole task when it has fewer), a
shuffled pass after another; as in the paper each pass counts the data once more, so :math:`E` passes give the
posterior of the data repeated :math:`E` times. Weights a minibatch does not reach (other tasks' heads) have
:math:`\partial L / \partial w_k = 0` and keep their Gaussian.
"""

from __future__ import annotations

from typing import Any

import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.continual.flat_gaussian import FlatGaussian
from bnn.inference.continual.learned import Learned
from bnn.inference.continual.setup import REGRESSION_NOISE, ContinualSetup

CLASSIFICATION_STD_INIT = 0.05
"""BGD's first scale for a softmax likelihood, within the paper's 0.045-0.06 for MNIST networks (chosen on split and
permuted digits: ``benchmarks/results/continual.md``)."""


def first_scale(setup: ContinualSetup) -> float:
    r"""``std_init``, or by default the first scale :math:`\sigma_0` that gives every likelihood row the same bound on
    :math:`\sigma_0^2 a`, :math:`a` the row's curvature in a logit: at most :math:`\tfrac14` for a softmax row
    (:math:`p(1 - p)`), :math:`1/\tau^2` for a Gaussian one of noise :math:`\tau`. The mean's step is
    :math:`\sigma^2` times the gradient, so :math:`\sigma_0^2 a` is a step size: a regression of noise 0.1 at the
    classification scale 0.05 overshoots and diverges in a few updates (:math:`\sigma_0 = 0.05\,\tau / 2` instead).
    """
    if setup.options.std_init is not None:
        return setup.options.std_init
    if setup.benchmark.is_classification:
        return CLASSIFICATION_STD_INIT
    return CLASSIFICATION_STD_INIT * REGRESSION_NOISE / 2


def bgd_update(state: FlatGaussian, expected_grad: torch.Tensor, expected_grad_noise: torch.Tensor,
               eta: float) -> FlatGaussian:
    r"""One BGD step from :math:`\mathbb{E}[\partial L/\partial w]` and :math:`\mathbb{E}[\epsilon\, \partial L /
    \partial w]` (see the module notes); the new scale is computed as :math:`\sigma / (\sqrt{1 + h^2} + h)` where
    :math:`h > 0`, the same number without the cancellation of :math:`\sqrt{1 + h^2} - h`."""
    mean, std = state.mean, state.std
    half = 0.5 * std * expected_grad_noise
    root = torch.sqrt(1 + half.pow(2))
    shrink = torch.where(half > 0, 1 / (root + half.clamp(min=0)), root - half)
    return FlatGaussian(mean - eta * std.pow(2) * expected_grad, std * shrink)


def expected_gradients(model, x: torch.Tensor, y: torch.Tensor, state: FlatGaussian, num: int,
                       generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Monte Carlo :math:`\mathbb{E}_\epsilon[\nabla L]` and :math:`\mathbb{E}_\epsilon[\epsilon \odot \nabla L]`
    over ``num`` draws in antithetic pairs (``num`` even), :math:`L = -\log p(y \mid x, W)` summed over the rows."""
    pairs = torch.randn(num // 2, state.mean.shape[0], generator=generator, dtype=state.mean.dtype)
    noise = torch.cat([pairs, -pairs])
    theta = (state.mean + state.std * noise).requires_grad_(True)
    loss = -model.observation_distribution(x, split_flat(model.sites, theta)).log_prob(y).sum()
    (grad,) = torch.autograd.grad(loss, theta)  # row s: the gradient of draw s's own loss
    return grad.mean(0), (grad * noise).mean(0)


def bgd(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """BGD's updates on task ``task``'s minibatches from ``carry["posterior"]`` (absent for the first task)."""
    options, model = setup.options, setup.model()
    generator = torch.Generator().manual_seed(options.seed + task)
    state = FlatGaussian.start(model, carry.get("posterior"), first_scale(setup), generator)
    x, y = setup.train_data(task)
    size, order = min(options.batch_size, x.shape[0]), torch.empty(0, dtype=torch.long)
    for index in range(options.steps):
        if order.numel() < size:
            order = torch.cat([order, torch.randperm(x.shape[0], generator=generator)])
        rows, order = order[:size], order[size:]
        expected_grad, expected_grad_noise = expected_gradients(model, x[rows], y[rows], state, options.mc_samples,
                                                                generator)
        state = bgd_update(state, expected_grad, expected_grad_noise, options.mean_eta)
        if not (torch.isfinite(state.mean).all() and torch.isfinite(state.std).all() and (state.std > 0).all()):
            raise FloatingPointError(f"bgd: the Gaussian left the finite numbers at update {index} of task {task}; "
                                     f"lower std_init (now {first_scale(setup):g}) or mean_eta (now {options.mean_eta})")
    return Learned(state.predictor(setup, model, options.seed + task), {"posterior": state.config(model, "bgd")})
