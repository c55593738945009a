r"""Bayesian linear regression with a closed-form posterior, the exact reference of the method tests.

The collection's network with no hidden layer, a Gaussian prior :math:`\mathcal{N}(0, s^2 I)`
on the weight and the bias and a known noise :math:`\sigma`, is the conjugate model

.. math::

    y = \Phi \beta + \varepsilon,\quad \Phi = [x, 1],\quad
    \beta \mid y \sim \mathcal{N}(m, S),\quad
    \Lambda = S^{-1} = \Phi^\top\Phi/\sigma^2 + I/s^2,\quad m = S\,\Phi^\top y/\sigma^2 .

The mean-field Gaussian closest to it in :math:`\mathrm{KL}(q \,\|\, p)` has means
:math:`m` and variances :math:`1/\Lambda_{kk}` (never larger than :math:`S_{kk}`).

Tempered at the likelihood temperature :math:`T` (:mod:`bnn.inference.core.temperature`), the posterior
:math:`\propto p(y \mid \beta)^{1/T} p(\beta)` is the same model's with the noise variance :math:`T\sigma^2`:
:math:`\Lambda_T = \Phi^\top\Phi/(T\sigma^2) + I/s^2`, :math:`m_T = \Lambda_T^{-1}\Phi^\top y/(T\sigma^2)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import pyro
import torch
import torch.nn.functional as F
from bnn.inference.core.temperature import tempered
from bnn.models import BayesianMLP, BayesianNetwork, GaussianLikelihood, GaussianPrior
from pyro.infer import JitTrace_ELBO

PRIOR_SCALE = 1.0
NOISE = 0.5
NUM_FEATURES = 2
NUM_DATA = 40


@dataclass(frozen=True)
class ConjugateProblem:
    model: BayesianNetwork
    x: torch.Tensor
    y: torch.Tensor
    mean: torch.Tensor  # (d + 1,) ordered as [weight..., bias]
    cov: torch.Tensor
    meanfield_var: torch.Tensor
    temperature: float = 1.0  # the likelihood's, which mean, cov and meanfield_var are tempered at

    def flatten(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        """Weight and bias draws ``(..., 1, d)`` and ``(..., 1)`` (each site of the model, in its order) as ``(..., d + 1)``."""
        pieces = [values[site.name] for site in self.model.sites]
        return torch.cat([v.reshape(*v.shape[: v.dim() - len(s.shape)], -1) for v, s in zip(pieces, self.model.sites)], -1)


def conjugate_problem(seed: int = 0, dtype=torch.float64, model: BayesianNetwork | None = None,
                      temperature: float = 1.0) -> ConjugateProblem:
    """A fixed synthetic data set and its exact posterior, in ``dtype``, tempered at ``temperature``; ``model`` is the
    network without hidden layers (the default) or another network of the same regression (its sites: the ``(1, d)``
    weight, then the bias), with the noise :data:`NOISE` whatever the temperature."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(NUM_DATA, NUM_FEATURES, generator=generator, dtype=dtype)
    beta = torch.tensor([0.8, -0.5], dtype=dtype)
    y = x @ beta + 0.3 + NOISE * torch.randn(NUM_DATA, generator=generator, dtype=dtype)
    phi = torch.cat([x, torch.ones(NUM_DATA, 1, dtype=dtype)], dim=1)
    noise_variance = temperature * NOISE**2
    precision = phi.T @ phi / noise_variance + torch.eye(NUM_FEATURES + 1, dtype=dtype) / PRIOR_SCALE**2
    cov = torch.linalg.inv(precision)
    mean = cov @ phi.T @ y / noise_variance
    model = model or BayesianMLP(NUM_FEATURES, 1, hidden=())
    model.prior, model.likelihood = GaussianPrior(PRIOR_SCALE), GaussianLikelihood(scale=NOISE)
    return ConjugateProblem(model, x, y, mean, cov, 1 / torch.diagonal(precision), temperature)


# SGD from an SVI fit's end (below): rates under 2 / lambda_max(Lambda) = 2 / 233 for the means and 2 / 2 for the
# log-scales (the curvatures of the expected loss at the optimum), a burn-in of 100 relaxation times (~2 steps),
# then CHAIN_STEPS recorded steps, cut into 40 batches (25 relaxation times each) for their standard errors
CHAIN_LOC_LR, CHAIN_LOG_SCALE_LR, CHAIN_BURN_IN, CHAIN_STEPS = 1 / 250, 0.25, 200, 2000


def stationary_sgd_chain(loss, params, step, record, *, steps: int = CHAIN_STEPS, seed: int = 2) -> torch.Tensor:
    r"""``record()`` after each of ``steps`` SGD steps that follow ``CHAIN_BURN_IN`` unrecorded ones, stacked.

    Each step calls ``step(grads)`` with the gradients of ``loss()`` (an unbiased estimate of
    the expected negative ELBO :math:`\bar F`) with respect to ``params``; it updates them in
    place, moving each coordinate by a fixed rate :math:`\eta` times minus an unbiased
    estimate of a partial derivative :math:`\partial_c \bar F` (in the coordinate itself or in
    another, such as :math:`\ln s`). The coordinate's expected step is then
    :math:`-\eta\,\mathbb{E}[\partial_c \bar F]`, so at stationarity
    :math:`\mathbb{E}[\partial_c \bar F(\theta_t)] = 0` exactly, whatever the rates. Returns shape
    ``(steps, ...)``.
    """
    pyro.set_rng_seed(seed)
    rows = []
    for _ in range(CHAIN_BURN_IN + steps):
        grads = torch.autograd.grad(loss(), params)
        with torch.no_grad():
            step(grads)
            rows.append(record())
    return torch.stack(rows[CHAIN_BURN_IN:])


def log_scale_step(params, loc_masks, loc_lr: float = CHAIN_LOC_LR):
    r"""The ``step`` of :func:`stationary_sgd_chain` for a mean-field Gaussian whose stationary mean is its exact optimum.

    Each raw parameter entry is a location :math:`\mu` (where its ``loc_masks`` entry is
    true) or the :math:`\rho` of a scale :math:`s = \operatorname{softplus}(\rho)`. The
    locations step by :math:`-\eta_\mu \hat g_\mu`, the :math:`\rho` by
    :math:`-\eta_s \hat g_{\ln s} = -\eta_s\, \hat g_\rho\, s / s'(\rho)`. In the conjugate
    model the expected negative ELBO is :math:`\tfrac12(\mu - m)^\top\Lambda(\mu - m)
    + \sum_k(\tfrac12\Lambda_{kk}s_k^2 - \ln s_k)` + const, so the expected steps are
    :math:`-\eta_\mu\Lambda(\mu - m)` and :math:`-\eta_s(\Lambda_{kk}s_k^2 - 1)`: at
    stationarity their means vanish, so :math:`\mathbb{E}[\mu] = m` and
    :math:`\mathbb{E}[s_k^2] = 1/\Lambda_{kk}` exactly (no learning-rate bias). ``loc_lr`` is :math:`\eta_\mu`, below
    :math:`2/\lambda_{max}(\Lambda)` (a tempered problem's :math:`\Lambda` grows as :math:`1/T`: scale it by
    :math:`T`).
    """

    def step(grads):
        for param, grad, is_loc in zip(params, grads, loc_masks):
            log_scale_grad = grad * F.softplus(param) / torch.sigmoid(param)
            param -= torch.where(is_loc, loc_lr * grad, CHAIN_LOG_SCALE_LR * log_scale_grad)

    return step


def batch_means(chain: torch.Tensor, num_batches: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The mean of ``chain`` (``(steps, ...)``) and its batch-means standard error.

    The chain is cut into ``num_batches`` consecutive batches; when a batch is much longer
    than the autocorrelation time the batch means are nearly independent, and
    :math:`\mathrm{SE} = \operatorname{sd}(\text{batch means}) / \sqrt{\text{num\_batches}}`.
    """
    usable = chain.shape[0] - chain.shape[0] % num_batches
    means = chain[:usable].reshape(num_batches, -1, *chain.shape[1:]).mean(1)
    return means.mean(0), means.std(0) / num_batches**0.5


def check_meanfield_optimum(
    problem: ConjugateProblem, chain: torch.Tensor, fitted: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Assert that a mean-field SVI fit reached the exact optimum (means :math:`m`, variances :math:`1/\Lambda_{kk}`).

    ``chain`` is :func:`stationary_sgd_chain` from the fit's end recording ``[means, variances]``
    (``(steps, 2(d + 1))``), ``fitted`` those values at the fit's end. The chain's average
    matches the exact values within 4 batch-means standard errors (t with 39 degrees of
    freedom: a false alarm 1 time in 3,600 per entry), and the fit ended within 4 of the
    chain's stationary standard deviations of its average: Adam's last steps at the end of a cosine schedule
    jitter less than the chain's SGD steps, so a converged fit lies in that spread and one
    that stopped short does not. Returns the chain's average and its standard errors.
    """
    mean, standard_error = batch_means(chain)
    exact = torch.cat([problem.mean, problem.meanfield_var])
    assert ((mean - exact).abs() < 4 * standard_error).all(), (mean - exact) / standard_error
    assert ((fitted - mean).abs() < 4 * chain.std(0)).all(), (fitted - mean) / chain.std(0)
    return mean, standard_error


def _jit_elbo(num_particles: int) -> JitTrace_ELBO:
    return JitTrace_ELBO(num_particles=num_particles, vectorize_particles=True, max_plate_nesting=1,
                         ignore_jit_warnings=True)


def autonormal_chain(problem: ConjugateProblem, posterior, *, num_particles: int = 64,
                     steps: int = CHAIN_STEPS) -> tuple[torch.Tensor, torch.Tensor]:
    """An AutoNormal SVI fit's ``[means, variances]`` at its end and the :func:`stationary_sgd_chain` of them from
    there (``num_particles`` draws per ELBO estimate), for :func:`check_meanfield_optimum`."""
    guide = posterior.extras["guide"]
    names = list(problem.model.latent_shapes)
    parameter = lambda group, name: reduce(getattr, name.split("."), group).detach()  # noqa: E731

    def loc_and_variance():
        loc = problem.flatten({name: parameter(guide.locs, name) for name in names})
        scale = problem.flatten({name: parameter(guide.scales, name) for name in names})
        return torch.cat([loc, scale**2])

    raw = dict(guide.named_parameters())  # scales are softplus(rho), AutoNormal's default constraint
    locs = [raw[f"locs.{name}_unconstrained"] for name in names]
    rhos = [raw[f"scales.{name}_unconstrained"] for name in names]
    masks = [torch.ones_like(p, dtype=torch.bool) for p in locs] + [torch.zeros_like(p, dtype=torch.bool) for p in rhos]
    elbo = _jit_elbo(num_particles)
    fitted = loc_and_variance()
    with guide.own_parameters():  # Pyro's JIT loss reads the parameters from the store by name, outside the guide
        model = tempered(problem.model, problem.temperature)
        chain = stationary_sgd_chain(lambda: elbo.differentiable_loss(model, guide.guide, problem.x, problem.y),
                                     locs + rhos, log_scale_step(locs + rhos, masks, CHAIN_LOC_LR * problem.temperature),
                                     loc_and_variance, steps=steps)
    return fitted, chain


def meanfield_chain(problem: ConjugateProblem, posterior, *, num_particles: int = 8,
                    steps: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`autonormal_chain` for a fit with the Bayes-by-Backprop guide (its own ELBO pair: closed-form KL, local
    reparameterisation when the guide has it)."""
    guide = posterior.extras["guide"]

    def loc_and_variance():
        loc_scale = guide.site_loc_scale()
        loc = problem.flatten({name: value[0] for name, value in loc_scale.items()})
        scale = problem.flatten({name: value[1] for name, value in loc_scale.items()})
        return torch.cat([loc, scale**2]).detach()

    (loc_rho,) = guide.parameters()  # rows (mu, rho)
    is_loc = torch.tensor([[True], [False]]).expand_as(loc_rho)
    elbo = _jit_elbo(num_particles)
    model, scored_guide = guide.elbo_pair()
    fitted = loc_and_variance()
    chain = stationary_sgd_chain(lambda: elbo.differentiable_loss(model, scored_guide, problem.x, problem.y),
                                 [loc_rho], log_scale_step([loc_rho], [is_loc]), loc_and_variance, steps=steps)
    return fitted, chain
