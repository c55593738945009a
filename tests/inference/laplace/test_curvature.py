"""Curvature of the likelihood and of the prior against independent autograd references."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from bnn.guides.flat_weights import num_weights, split_flat
from bnn.inference.curvature import output_curvature
from bnn.inference.laplace.curvature import (
    HessianType,
    Structure,
    check_combination,
    check_ggn_supported,
    check_memory,
    covered_from,
    likelihood_curvature,
)
from bnn.inference.laplace.prior_curvature import elementwise_curvature, prior_curvature
from bnn.models import BayesianMLP, GaussianPrior, LaplacePrior, Likelihood, ScaleMixturePrior
from bnn.models.likelihoods import GaussianLikelihood
from bnn.models.sites import WeightSite
from torch.autograd.functional import hessian, jacobian

from tests.support.conjugate import NOISE, conjugate_problem

GGN, EXACT = HessianType.GGN, HessianType.EXACT
FULL, DIAG, LAST = Structure.FULL, Structure.DIAG, Structure.LAST_LAYER


def tiny_problem(likelihood: str, out_features: int, seed: int = 0):
    """A 2-4-K tanh net at random weights, with targets for ``likelihood`` (float64)."""
    generator = torch.Generator().manual_seed(seed)
    model = BayesianMLP(2, out_features, hidden=(4,), likelihood=likelihood)
    theta = torch.randn(num_weights(model.sites), generator=generator, dtype=torch.float64)
    x = torch.randn(9, 2, generator=generator, dtype=torch.float64)
    if likelihood == "bernoulli":
        y = torch.randint(0, 2, (9,), generator=generator).double()
    elif likelihood == "categorical":
        y = torch.randint(0, out_features, (9,), generator=generator)
    else:
        y = torch.randn(9, out_features, generator=generator, dtype=torch.float64).squeeze(-1)
    return model, theta, x, y


def reference_ggn(model, theta, x, y, latents):
    r""":math:`\sum_i J_i^\top H_i J_i` with both factors by ``torch.autograd.functional`` on the model's own log-density."""
    jac = jacobian(lambda t: model.forward(x, split_flat(model.sites, t)), theta)  # (n, K, D)
    f = model.forward(x, split_flat(model.sites, theta))
    total = torch.zeros(theta.shape[0], theta.shape[0], dtype=theta.dtype)
    for i in range(x.shape[0]):
        def nll(f_i, i=i):
            return -model.likelihood.distribution(f_i.unsqueeze(0), latents).log_prob(y[i : i + 1]).sum()

        total += jac[i].T @ hessian(nll, f[i]) @ jac[i]
    return total


@pytest.mark.parametrize(
    "likelihood, out_features, latents",
    [
        ("bernoulli", 1, {}),
        ("categorical", 3, {}),
        ({"name": "gaussian", "scale": None}, 1, {"sigma": torch.tensor(0.4, dtype=torch.float64)}),
    ],
)
def test_ggn_matches_an_autograd_reference(float64, likelihood, out_features, latents):
    model, theta, x, y = tiny_problem(likelihood, out_features)
    ggn = likelihood_curvature(model, x, y, theta, latents, hessian_type=GGN, structure=FULL)
    torch.testing.assert_close(ggn, reference_ggn(model, theta, x, y, latents), rtol=1e-10, atol=1e-12)
    assert torch.linalg.eigvalsh(ggn).min() > -1e-10  # positive semi-definite


def test_ggn_is_the_exact_hessian_of_the_linear_gaussian_model(float64):
    problem = conjugate_problem()
    theta = torch.randn(3)  # the Hessian of a linear-Gaussian model does not depend on theta
    ggn = likelihood_curvature(problem.model, problem.x, problem.y, theta, {}, hessian_type=GGN, structure=FULL)
    exact = likelihood_curvature(problem.model, problem.x, problem.y, theta, {}, hessian_type=EXACT, structure=FULL)
    phi = torch.cat([problem.x, torch.ones(problem.x.shape[0], 1)], dim=1)
    torch.testing.assert_close(ggn, phi.T @ phi / NOISE**2, rtol=1e-12, atol=0)
    torch.testing.assert_close(exact, ggn, rtol=1e-10, atol=1e-10)


def test_exact_hessian_matches_autograd_and_differs_from_the_ggn_of_a_deep_net(float64):
    model, theta, x, y = tiny_problem("bernoulli", 1)
    exact = likelihood_curvature(model, x, y, theta, {}, hessian_type=EXACT, structure=FULL)

    def nll(t):
        return -model.observation_distribution(x, split_flat(model.sites, t)).log_prob(y).sum()

    torch.testing.assert_close(exact, hessian(nll, theta), rtol=1e-10, atol=1e-12)
    ggn = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=FULL)
    assert (exact - ggn).abs().max() > 1e-3  # the second-order term of the hidden layer


@pytest.mark.parametrize("likelihood, out_features", [("bernoulli", 1), ("categorical", 3), ("gaussian", 2)])
def test_structures_are_parts_of_the_full_matrix(float64, likelihood, out_features):
    model, theta, x, y = tiny_problem(likelihood, out_features)
    full = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=FULL)
    diag = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=DIAG)
    last = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=LAST)
    start = covered_from(model, LAST)
    assert start == num_weights(model.sites) - (4 * out_features + out_features)
    torch.testing.assert_close(diag, full.diagonal(), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(last, full[start:, start:], rtol=1e-12, atol=1e-14)
    # f is linear in the last layer, so there the exact Hessian is the GGN
    last_exact = likelihood_curvature(model, x, y, theta, {}, hessian_type=EXACT, structure=LAST)
    torch.testing.assert_close(last_exact, last, rtol=1e-10, atol=1e-12)


def test_chunking_over_data_gives_the_same_curvature(float64, monkeypatch):
    model, theta, x, y = tiny_problem("categorical", 3)
    whole = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=FULL)
    # a budget of two rows' Jacobians forces chunks of 2 rows (and a last chunk of 1)
    covered, width = theta.numel(), 2 + 4 + 3
    monkeypatch.setattr(output_curvature, "JACOBIAN_BUDGET_BYTES", 2 * covered * width * 8)
    assert output_curvature.rows_per_chunk(model, covered, 8) == 2
    chunked = likelihood_curvature(model, x, y, theta, {}, hessian_type=GGN, structure=FULL)
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-14)


def test_memory_is_checked_with_numbers_before_allocating():
    model = BayesianMLP(100, 1, hidden=(200, 200))  # D = 60,601 weights
    with pytest.raises(ValueError) as error:
        check_memory(model, FULL, 8, max_memory_gib=2.0)
    message = str(error.value)
    assert "60,601 weights" in message and "137 GiB" in message and "max_memory_gib=2" in message  # 5 x 60,601^2 x 8 B
    assert "structure='kron'" in message and "'diag'" in message and "'last-layer' (201 weights" in message
    check_memory(model, DIAG, 8, max_memory_gib=2.0)
    check_memory(model, Structure.KRON, 8, max_memory_gib=2.0)
    check_memory(model, LAST, 8, max_memory_gib=2.0)


PEAK_PROBE = """
import resource, sys, torch
from bnn.inference.laplace.curvature import FULL_MATRICES_AT_PEAK
from bnn.inference.laplace.curvature import HessianType
from bnn.inference.laplace.fit import covariance_factor
dim = int(sys.argv[1])
precision = torch.full((dim, dim), 0.5 / dim, dtype=torch.float64)  # built in place: one D x D matrix so far
precision.diagonal().add_(1.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
covariance_factor(precision, HessianType.GGN, 0.0)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024 / (dim * dim * 8), FULL_MATRICES_AT_PEAK)
"""


@pytest.mark.subprocess
def test_the_declared_peak_covers_the_measured_peak_of_the_factorisation():
    """In a fresh process, the resident memory the factorisation adds on top of the precision it is given
    stays within the other ``FULL_MATRICES_AT_PEAK - 1`` matrices of the memory check (ru_maxrss, D = 2000)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", PEAK_PROBE, "2000"], capture_output=True, text=True, check=True)
    added, declared = (float(v) for v in result.stdout.split())
    assert added <= declared - 1, f"the factorisation added {added:.2f} D x D matrices; declared {declared}"


def test_wrong_combinations_and_likelihoods_are_refused():
    with pytest.raises(ValueError, match="hessian='exact' with structure='diag' is not offered"):
        check_combination(EXACT, DIAG)

    @dataclass(frozen=True)
    class Poisson(Likelihood):
        task = "regression"

        def distribution(self, f, latents):
            raise NotImplementedError

        def check_targets(self, y, out_features):
            return y

    with pytest.raises(ValueError, match="the GGN curvature knows the likelihoods .* not Poisson; use hessian='exact'"):
        check_ggn_supported(Poisson())
    check_ggn_supported(GaussianLikelihood())


def test_prior_curvature_gaussian_exact_laplace_zero_mixture_by_finite_differences(float64):
    model = BayesianMLP(2, 1, hidden=(3,), prior=GaussianPrior(0.5, fan_in_scaling=True))
    theta = torch.randn(num_weights(model.sites))
    expected = torch.cat([torch.full((site.numel,), site.fan_in / 0.25) for site in model.sites])
    torch.testing.assert_close(prior_curvature(model, theta, 0), expected, rtol=1e-12, atol=0)

    values = torch.tensor([-2.0, -0.3, 0.01, 0.1, 0.7])
    site = WeightSite("w", 0, values.shape, 1)
    assert torch.equal(elementwise_curvature(LaplacePrior(0.5).distribution(site), values), torch.zeros(5))
    mixture = ScaleMixturePrior(0.5, 1.0, math.exp(-3)).distribution(site)
    h = 1e-5  # central differences: truncation ~h^2 |f''''| ~1e-6 here, round-off ~1e-16 / h^2 = 1e-6
    finite = -(mixture.log_prob(values + h) - 2 * mixture.log_prob(values) + mixture.log_prob(values - h)) / h**2
    curvature = elementwise_curvature(mixture, values)
    torch.testing.assert_close(curvature, finite, rtol=1e-4, atol=1e-4)
    assert curvature[3] < 0 < curvature[2]  # negative between the spike and the slab


def test_prior_without_positive_curvature_is_refused_and_last_layer_only_counts_its_own(float64):
    model = BayesianMLP(2, 1, hidden=(3,), prior={"*": LaplacePrior(1.0), "layers.1": GaussianPrior(1.0)})
    theta = torch.randn(num_weights(model.sites))
    with pytest.raises(ValueError) as error:
        prior_curvature(model, theta, 0)
    message = str(error.value)
    assert "LaplacePrior on 'layers.0.weight' (6 of 6 weights)" in message
    assert "Gaussian priors with every structure" in message and "'layers.1': 'gaussian'" in message
    start = covered_from(model, LAST)
    torch.testing.assert_close(prior_curvature(model, theta, start), torch.ones(4), rtol=0, atol=0)
