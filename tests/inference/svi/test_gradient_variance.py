r"""Tests of :mod:`bnn.inference.svi.gradient_variance`, against the exact variance of Bayesian linear regression.

A :class:`BayesianMLP` without hidden layers is :math:`y_n \sim \mathcal{N}(w x_n + b, \tau^2)` with a
:math:`\mathcal{N}(0, s^2)` prior on :math:`\theta = (w, b)`. Under the mean-field guide,
:math:`\theta = \mu + \sigma \odot \varepsilon`, :math:`\sigma = \operatorname{softplus}(\rho)`, the gradient of the
negative ELBO's data term in :math:`\theta` is :math:`(H\theta - X^\top y)/\tau^2` with :math:`X = [x, 1]`,
:math:`H = X^\top X`. The closed-form KL is deterministic in :math:`(\mu, \rho)`, so the estimator is

.. math::

    \hat g_\mu = c + Q D \varepsilon, \qquad
    \hat g_\rho = \operatorname{sigmoid}(\rho) \odot \varepsilon \odot (c + Q D \varepsilon) + \text{const},

:math:`D = \operatorname{diag}(\sigma)`, :math:`c = (H\mu - X^\top y)/\tau^2`, :math:`Q = H/\tau^2`; the Monte Carlo KL
:math:`\log q(\theta) - \log p(\theta)` adds :math:`\theta/s^2` (the total derivative of :math:`\log q` at the draw is
deterministic): :math:`c \mathrel{+}= \mu/s^2`, :math:`Q \mathrel{+}= I/s^2`. Hence

.. math::

    \operatorname{Var}[\hat g_{\mu_k}] = \sum_j Q_{kj}^2\sigma_j^2, \qquad
    \operatorname{Var}[\hat g_{\rho_k}] = \operatorname{sigmoid}(\rho_k)^2\Big(c_k^2 + \sum_j Q_{kj}^2\sigma_j^2
    + Q_{kk}^2\sigma_k^2\Big).

With local reparameterisation the output is :math:`f_n = m_n + v_n\eta_n`, :math:`m_n = \mu_w x_n + \mu_b`,
:math:`v_n^2 = \sigma_w^2 x_n^2 + \sigma_b^2`, one :math:`\eta_n` per example, so with :math:`a_n = (x_n, 1)`,
:math:`r_n = m_n - y_n` and :math:`u_{nk} = \sigma_k a_{nk}^2 / v_n`,

.. math::

    \operatorname{Var}[\hat g_{\mu_k}] = \frac{1}{\tau^4}\sum_n a_{nk}^2 v_n^2, \qquad
    \operatorname{Var}[\hat g_{\rho_k}] = \frac{\operatorname{sigmoid}(\rho_k)^2}{\tau^4}\sum_n u_{nk}^2 (r_n^2 + 2 v_n^2).

``num_particles`` independent draws averaged divide every variance by their number. A measured variance of
:math:`S` draws has a standard error of :math:`\sqrt{(\mu_4 - \sigma^4)/(S - G)}` to first order, :math:`\mu_4` the
estimator's fourth central moment, computed here exactly by Gauss-Hermite quadrature.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyro
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.guides import MeanFieldGuide
from bnn.inference import fit
from bnn.inference.svi import gradient_variance
from bnn.inference.svi.gradient_variance import GROUPS
from bnn.models import BayesianMLP, GaussianPrior
from pyro.nn import PyroParam

DRAWS = 1000
Z = 4.5  # standard errors allowed between a measured and an exact variance
NOISE, PRIOR_SCALE = 2.0, 0.5  # a weak likelihood beside a narrow prior: the prior's Monte Carlo noise is material
LOC, RHO = (0.3, -0.2), (-0.5, 0.2)
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(8)  # exact for polynomials of degree < 16
WEIGHTS = WEIGHTS / WEIGHTS.sum()


@pytest.fixture(scope="module")
def regression():
    """Eight points of a line; the model and its data."""
    x = torch.linspace(-1.0, 2.0, 8)[:, None]
    y = 0.5 * x[:, 0] - 0.3 + 0.4 * torch.sin(5 * x[:, 0])
    model = BayesianMLP(1, 1, hidden=(), prior=GaussianPrior(PRIOR_SCALE), likelihood={"name": "gaussian", "scale": NOISE})
    return model, x, y


def linear_guide(model, **options) -> MeanFieldGuide:
    """A mean-field guide of the linear model at :math:`\\mu` = ``LOC``, :math:`\\rho` = ``RHO``."""
    guide = MeanFieldGuide(model, **options)
    guide.loc_rho = PyroParam(torch.tensor([LOC, RHO]))
    return guide


def sample_moments(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variance and fourth central moment of each column of ``values`` under quadrature ``weights``."""
    centred = values - weights @ values
    return weights @ centred**2, weights @ centred**4


def weight_draw_gradients(x, y, kl: str, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r""":math:`(\hat g_{\mu_w}, \hat g_{\mu_b}, \hat g_{\rho_w}, \hat g_{\rho_b})` with weight draws at the nodes of a
    2-D quadrature over :math:`\varepsilon`, the nodes' weights, and the closed-form variance; the data term
    scaled by ``scale`` (:math:`N/|B|` on a minibatch), the closed-form KL's deterministic gradient left out."""
    design = np.column_stack([x[:, 0].double().numpy(), np.ones(len(x))])
    mu, rho = np.array(LOC), np.array(RHO)
    sigma, slope = np.log1p(np.exp(rho)), 1 / (1 + np.exp(-rho))
    q = scale * design.T @ design / NOISE**2
    c = scale * (design.T @ design @ mu - design.T @ y.double().numpy()) / NOISE**2
    if kl == "monte-carlo":
        q, c = q + np.eye(2) / PRIOR_SCALE**2, c + mu / PRIOR_SCALE**2
    eps = np.stack(np.meshgrid(NODES, NODES, indexing="ij"), -1).reshape(-1, 2)
    theta_gradient = c + eps * sigma @ q.T
    spread = q**2 @ sigma**2
    variance = np.concatenate([spread, slope**2 * (c**2 + spread + np.diag(q) ** 2 * sigma**2)])
    return np.hstack([theta_gradient, slope * eps * theta_gradient]), np.outer(WEIGHTS, WEIGHTS).reshape(-1), variance


def exact_weight_draws(x, y, kl: str) -> tuple[np.ndarray, np.ndarray]:
    """Variance and fourth central moment of the four entries with weight draws on the full data."""
    values, weights, variance = weight_draw_gradients(x, y, kl)
    quadrature, fourth = sample_moments(values, weights)
    np.testing.assert_allclose(quadrature, variance, rtol=1e-10)  # the quadrature agrees with the formulas
    return variance, fourth


def exact_minibatch_draws(x, y, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The same on minibatches of ``batch_size``, every subset equally likely: the mixture over subsets."""
    subsets = [list(subset) for subset in itertools.combinations(range(len(x)), batch_size)]
    parts = [weight_draw_gradients(x[subset], y[subset], "closed-form", len(x) / batch_size) for subset in subsets]
    values = np.vstack([values for values, _, _ in parts])
    weights = np.concatenate([weights for _, weights, _ in parts]) / len(subsets)
    return sample_moments(values, weights)


def exact_local_draws(x, y) -> tuple[np.ndarray, np.ndarray]:
    """Variance and fourth moment of the same entries with local reparameterisation: sums over examples of
    independent terms, each by 1-D quadrature over its :math:`\\eta_n` (fourth moment = sum of fourth
    cumulants + 3 variance squared)."""
    inputs, targets = x[:, 0].double().numpy(), y.double().numpy()
    mu, rho = np.array(LOC), np.array(RHO)
    sigma, slope = np.log1p(np.exp(rho)), 1 / (1 + np.exp(-rho))
    a = np.column_stack([inputs, np.ones_like(inputs)])  # (n, 2)
    v = np.sqrt(a**2 @ sigma**2)
    r = a @ mu - targets
    u = sigma * a**2 / v[:, None]
    eta = NODES[:, None, None]  # (nodes, n, 1)
    terms = np.concatenate([a * v[:, None] * eta, slope * u * (r[:, None] * eta + v[:, None] * eta**2)], -1) / NOISE**2
    centred = terms - np.tensordot(WEIGHTS, terms, axes=1)
    term_variance = np.tensordot(WEIGHTS, centred**2, axes=1)  # (n, 4)
    term_cumulant = np.tensordot(WEIGHTS, centred**4, axes=1) - 3 * term_variance**2
    variance = term_variance.sum(0)
    closed = np.concatenate([(a**2 * v[:, None] ** 2).sum(0), slope**2 * (u**2 * (r**2 + 2 * v**2)[:, None]).sum(0)])
    np.testing.assert_allclose(variance * NOISE**4, closed, rtol=1e-10)  # the quadrature agrees with the formulas
    return variance, term_cumulant.sum(0) + 3 * variance**2


def measured(result) -> np.ndarray:
    """The measured variances of :math:`(\\mu_w, \\mu_b, \\rho_w, \\rho_b)` (the rows of ``loc_rho``)."""
    (variance,) = result.variance.values()
    return variance.reshape(-1).numpy()


def assert_within_monte_carlo_error(measured_variance, variance, fourth, draws=DRAWS):
    standard_error = np.sqrt((fourth - variance**2) / (draws - GROUPS))
    assert np.all(np.abs(measured_variance - variance) <= Z * standard_error), (measured_variance, variance, standard_error)


@pytest.mark.long
@pytest.mark.parametrize("kl", ["closed-form", "monte-carlo"])
def test_weight_draws_match_the_exact_variance(regression, kl):
    model, x, y = regression
    variance, fourth = exact_weight_draws(x, y, kl)
    result = gradient_variance(model, linear_guide(model, kl=kl, local_reparameterisation=False), x, y,
                               num_draws=DRAWS, seed=0)
    assert result.num_draws == DRAWS
    assert_within_monte_carlo_error(measured(result), variance, fourth)
    assert result.total == pytest.approx(measured(result).sum())
    assert result.mean_variance == pytest.approx(result.total / 4)


@pytest.mark.long
def test_local_reparameterisation_matches_the_exact_variance(regression):
    model, x, y = regression
    variance, fourth = exact_local_draws(x, y)
    result = gradient_variance(model, linear_guide(model, local_reparameterisation=True), x, y, num_draws=DRAWS, seed=1)
    assert_within_monte_carlo_error(measured(result), variance, fourth)


@pytest.mark.long
def test_particles_divide_the_variance_by_their_number(regression):
    """Four particles averaged: variance / 4 and, the particles being independent, a fourth moment
    :math:`\\mu_4/K^3 + 3(K-1)\\sigma^4/K^3` of the mean."""
    model, x, y = regression
    variance, fourth = exact_weight_draws(x, y, "closed-form")
    k = 4
    result = gradient_variance(model, linear_guide(model, local_reparameterisation=False), x, y, num_draws=DRAWS,
                               num_particles=k, seed=2)
    assert_within_monte_carlo_error(measured(result), variance / k, fourth / k**3 + 3 * (k - 1) * variance**2 / k**3)


def test_the_closed_form_kl_has_less_variance_than_the_monte_carlo_kl(regression):
    """Beyond the Monte Carlo error the function reports itself; the exact ratio of the traces is 7.3 here."""
    model, x, y = regression
    exact = {kl: exact_weight_draws(x, y, kl)[0].sum() for kl in ("closed-form", "monte-carlo")}
    closed, monte_carlo = (gradient_variance(model, linear_guide(model, kl=kl, local_reparameterisation=False), x, y,
                                             num_draws=200, seed=3) for kl in ("closed-form", "monte-carlo"))
    assert exact["monte-carlo"] / exact["closed-form"] > 7
    margin = 5 * math.hypot(closed.standard_error, monte_carlo.standard_error)
    assert monte_carlo.total - closed.total > margin


@pytest.mark.long
def test_local_reparameterisation_lowers_the_variance_of_a_network():
    """A 1-8-1 network at its starting parameters (a draw from the prior, sigma 0.31): one draw of noise per
    example instead of one shared by the whole batch."""
    data = load_toy1d(n_train=40, n_test=10)
    model = BayesianMLP(1, 1, hidden=(8,), likelihood={"name": "gaussian", "scale": 0.1})
    results = {}
    for local in (False, True):
        torch.manual_seed(0)  # both guides start at the same prior draw
        guide = MeanFieldGuide(model, init_rho=-1.0, local_reparameterisation=local)
        results[local] = gradient_variance(model, guide, data.x_train, data.y_train, num_draws=100, seed=4)
    margin = 5 * math.hypot(results[False].standard_error, results[True].standard_error)
    assert results[False].total - results[True].total > margin


@pytest.mark.long
def test_minibatches_match_the_exact_variance_and_the_full_batch_is_no_minibatch(regression):
    model, x, y = regression
    variance, fourth = exact_minibatch_draws(x, y, 2)
    result = gradient_variance(model, linear_guide(model, local_reparameterisation=False), x, y, num_draws=DRAWS,
                               batch_size=2, seed=5)
    assert_within_monte_carlo_error(measured(result), variance, fourth)
    full, same = (gradient_variance(model, linear_guide(model), x, y, num_draws=20, batch_size=batch_size, seed=5)
                  for batch_size in (None, len(x)))
    assert same.total == full.total


@pytest.mark.long
def test_a_fitted_guide_is_measured_at_its_own_parameters_and_nothing_leaks():
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": 0.2})
    posterior = fit(model, data, "svi", steps=50, num_samples=5, progress=False, seed=0)
    fitted = posterior.extras["guide"]
    (name,) = fitted.param_state["params"]
    fitted_values = fitted.loc_rho.detach().clone()
    leaf = fitted.param_state["params"][name]
    grad_before = None if leaf.grad is None else leaf.grad.clone()
    copy = MeanFieldGuide(posterior.model)
    copy.loc_rho = PyroParam(fitted_values)
    pyro.get_param_store().clear()
    pyro.param(name, torch.zeros_like(fitted_values))  # a stale value under the fitted guide's own name
    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    result = gradient_variance(posterior.model, fitted, data.x_train, data.y_train, num_draws=20, seed=6)
    again = gradient_variance(posterior.model, copy, data.x_train, data.y_train, num_draws=20, seed=6)
    assert torch.equal(torch.rand(3), expected_next)  # the caller's random state is left alone
    assert torch.equal(result.variance[name], next(iter(again.variance.values())))
    assert torch.equal(pyro.param(name).detach(), torch.zeros_like(fitted_values))
    assert list(pyro.get_param_store().keys()) == [name]
    assert torch.equal(fitted.loc_rho.detach(), fitted_values)
    assert (leaf.grad is None and grad_before is None) or torch.equal(leaf.grad, grad_before)  # autograd.grad writes no .grad
    pyro.get_param_store().clear()


def fixed_guide(x, y=None, num_data=None):
    """A guide without parameters."""
    pyro.sample("layers.0.weight", pyro.distributions.Normal(torch.zeros(1, 1), 1.0).to_event(2))
    pyro.sample("layers.0.bias", pyro.distributions.Normal(torch.zeros(1), 1.0).to_event(1))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"model": "not a model"}, TypeError, "model must be a BayesianNetwork"),
        ({"guide": 3}, TypeError, "guide must be a guide callable"),
        ({"x": torch.zeros(8, 2)}, ValueError, "reads 1 input features but x has 2"),
        ({"y": torch.zeros(7)}, ValueError, "differ in length"),
        ({"num_draws": 19}, ValueError, "num_draws must be an integer >= 20"),
        ({"num_draws": 50.0}, ValueError, "num_draws must be an integer"),
        ({"batch_size": 9}, ValueError, "batch_size (at most the 8 examples)"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"num_particles": 0}, ValueError, "num_particles must be a positive integer"),
        ({"seed": -1}, ValueError, "seed must be a non-negative integer"),
        ({"guide": fixed_guide}, ValueError, "the guide has no parameters"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(regression, change, error, message):
    model, x, y = regression
    arguments = {"model": model, "guide": linear_guide(model), "x": x, "y": y, **change}
    options = {key: arguments.pop(key) for key in ("num_draws", "batch_size", "num_particles", "seed") if key in arguments}
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        gradient_variance(arguments["model"], arguments["guide"], arguments["x"], arguments["y"], **options)
