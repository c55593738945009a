"""Prior predictive functions against their exact variances, with tolerances from the Monte Carlo error."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from bnn.models import BayesianMLP, GaussianPrior, LaplacePrior, MultiHeadMLP, Prior, prior_function_draws, register_prior
from scipy import integrate, stats

X = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [3.0, 1.0, -1.0]], dtype=torch.float64)
DRAWS = 40_000
SDS = 4.0  # a fixed seed, and a tolerance of four Monte Carlo standard errors


def assert_variance(f: torch.Tensor, expected: torch.Tensor) -> None:
    """The sample variance of ``f`` ``(S, n, 1)`` (known mean 0) equals ``expected`` ``(n,)`` within ``SDS`` standard
    errors; the standard error of a mean of squares is sd(f^2) / sqrt(S), estimated from the draws."""
    squares = f[..., 0].pow(2)
    standard_error = squares.std(0) / math.sqrt(f.shape[0])
    assert torch.all((squares.mean(0) - expected).abs() < SDS * standard_error), (squares.mean(0), expected)


def linear(prior) -> BayesianMLP:
    return BayesianMLP(3, 1, hidden=(), prior=prior)


def test_a_linear_gaussian_network_has_variance_sigma_b2_plus_sigma_w2_norm_x2():
    sigma_w, sigma_b = 0.7, 1.5
    model = linear({"layers.0.weight": GaussianPrior(sigma_w), "layers.0.bias": GaussianPrior(sigma_b)})
    f = prior_function_draws(model, X, DRAWS, seed=0)
    assert f.shape == (DRAWS, 3, 1) and f.dtype == torch.float64
    assert_variance(f, sigma_b**2 + sigma_w**2 * X.pow(2).sum(1))
    # and the covariance between two inputs is sigma_b^2 + sigma_w^2 x.x'
    products = f[:, 1, 0] * f[:, 2, 0]
    expected = sigma_b**2 + sigma_w**2 * float(X[1] @ X[2])
    assert abs(products.mean().item() - expected) < SDS * products.std().item() / math.sqrt(DRAWS)


def test_fan_in_scaling_divides_every_variance_by_the_fan_in():
    f = prior_function_draws(linear(GaussianPrior(2.0, fan_in_scaling=True)), X, DRAWS, seed=1)
    assert_variance(f, 4.0 / 3 * (1 + X.pow(2).sum(1)))


def test_a_registered_non_gaussian_prior_by_name():
    f = prior_function_draws(linear("laplace"), X, DRAWS, seed=2)  # Laplace(0, 1): variance 2 b^2 = 2
    assert_variance(f, 2.0 * (1 + X.pow(2).sum(1)))


@dataclass(frozen=True)
class UniformPrior(Prior):
    """A user-written prior: w ~ U(-a, a), variance a^2 / 3."""

    half_width: float = 1.0

    def distribution(self, site):
        return dist.Uniform(-self.half_width, self.half_width).expand(site.shape)


def test_a_user_written_prior_as_an_instance_and_registered_by_name():
    register_prior("test-prior-predictive-uniform", UniformPrior)
    for prior in (UniformPrior(3.0), {"name": "test-prior-predictive-uniform", "half_width": 3.0}):
        f = prior_function_draws(linear(prior), X, DRAWS, seed=3)
        assert_variance(f, 3.0 * (1 + X.pow(2).sum(1)))


def expected_tanh_square(variance: float) -> float:
    """E[tanh(a)^2] for a ~ N(0, variance), by adaptive quadrature (error below 1e-8)."""
    density = stats.norm(scale=math.sqrt(variance)).pdf
    value, error = integrate.quad(lambda a: math.tanh(a) ** 2 * density(a), -math.inf, math.inf, epsabs=1e-10)
    assert error < 1e-8
    return value


def test_per_layer_and_per_site_mappings_are_honoured():
    # f(x) = sum_j v_j tanh(a_j(x)) + c with a_j(x) ~ N(0, s0^2 (1 + |x|^2)) independent of v_j ~ Laplace(0, b), c ~ N(0, s^2):
    # Var f(x) = s^2 + H 2 b^2 E[tanh(a)^2]. Swapping which layer gets which prior changes every term.
    hidden, s0, b, s = 4, 2.0, 0.3, 0.5
    prior = {"layers.0": GaussianPrior(s0), "layers.1.weight": LaplacePrior(b), "*": GaussianPrior(s)}
    model = BayesianMLP(3, 1, hidden=(hidden,), prior=prior)
    f = prior_function_draws(model, X, DRAWS, seed=4)
    expected = [s**2 + hidden * 2 * b**2 * expected_tanh_square(s0**2 * (1 + float(row.pow(2).sum()))) for row in X]
    assert_variance(f, torch.tensor(expected, dtype=torch.float64))


def test_multi_head_networks_draw_each_head_from_its_prior():
    model = MultiHeadMLP(2, 1, num_heads=2, hidden=(), prior={"*": GaussianPrior(1.0), "heads.1": GaussianPrior(0.1)})
    x = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the last column picks the head
    f = prior_function_draws(model, x, DRAWS, seed=5)
    assert_variance(f, torch.tensor([3.0, 0.03]))


def test_the_same_seed_gives_the_same_draws_and_leaves_the_callers_state_alone():
    model = BayesianMLP(3, 2, hidden=(5,))
    pyro.clear_param_store()
    pyro.param("caller", torch.ones(2))
    state = torch.get_rng_state()
    first = prior_function_draws(model, X.float(), 10, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first, prior_function_draws(model, X.float(), 10, seed=7))
    assert not torch.equal(first, prior_function_draws(model, X.float(), 10, seed=8))
    assert list(pyro.get_param_store().keys()) == ["caller"]
    pyro.clear_param_store()


@pytest.mark.parametrize(
    "x, num_draws, seed, error, message",
    [
        (torch.zeros(4), 10, 0, ValueError, r"x must have shape \(n, 3\).*got \(4,\).*reshape"),
        (torch.zeros(4, 2), 10, 0, ValueError, r"x must have shape \(n, 3\).*got \(4, 2\)"),
        (torch.zeros(0, 3), 10, 0, ValueError, r"n >= 1"),
        (torch.zeros(4, 3, dtype=torch.long), 10, 0, ValueError, "finite floating-point.*int64"),
        (torch.full((4, 3), float("nan")), 10, 0, ValueError, "NaN or infinite"),
        (np.zeros((4, 3)), 10, 0, TypeError, "x must be a torch.Tensor.*torch.as_tensor"),
        (torch.zeros(4, 3), 0, 0, ValueError, "num_draws must be a positive integer, got 0"),
        (torch.zeros(4, 3), -5, 0, ValueError, "num_draws must be a positive integer, got -5"),
        (torch.zeros(4, 3), 2.5, 0, ValueError, "num_draws must be a positive integer, got 2.5"),
        (torch.zeros(4, 3), 10, -1, ValueError, "seed must be a non-negative integer below 2\\*\\*32, got -1"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(x, num_draws, seed, error, message):
    with pytest.raises(error, match=message):
        prior_function_draws(linear("gaussian"), x, num_draws, seed)


def test_a_model_that_is_not_a_bayesian_mlp_is_refused():
    with pytest.raises(TypeError, match=r"model must be a BayesianNetwork \(bnn.models\), got function"):
        prior_function_draws(lambda x: x, X, 10, 0)
