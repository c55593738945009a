"""The MAP point estimate: the mode of the conjugate posterior (ridge), maximum likelihood without the prior (least
squares, unpenalised logistic regression), a plug-in predictive, its own convergence check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.evaluation.compare import compare, rank
from bnn.models import BayesianMLP
from sklearn.linear_model import LogisticRegression

from tests.support.conjugate import NOISE, PRIOR_SCALE


@pytest.fixture(scope="module")
def estimate(conjugate):
    return fit(conjugate.model, (conjugate.x, conjugate.y), "map", map_tolerance=1e-8, seed=1, progress=False)


def test_the_estimate_is_the_mode_of_the_exact_posterior(conjugate, estimate):
    # Gaussian prior and likelihood: the mode is the posterior mean m = S Phi^T y / sigma^2, to the L-BFGS tolerance
    theta = conjugate.flatten({name: value[0, 0] for name, value in estimate.samples.items()})
    assert torch.allclose(theta, conjugate.mean, atol=1e-6)
    assert estimate.num_chains == 1 and estimate.num_draws == 1
    assert estimate.record.map_converged and estimate.record.problems() == []


@pytest.mark.long
def test_the_mle_is_least_squares_and_the_map_is_ridge(conjugate):
    # linear network, Gaussian noise sigma, prior N(0, s^2 I) on weight and bias: the MLE minimises ||y - Phi b||^2,
    # the MAP adds the penalty (sigma / s)^2 ||b||^2; both in closed form
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], dim=1)
    least_squares = torch.linalg.lstsq(phi, conjugate.y.unsqueeze(1)).solution.squeeze(1)
    ridge = torch.linalg.solve(phi.T @ phi + (NOISE / PRIOR_SCALE) ** 2 * torch.eye(3), phi.T @ conjugate.y)
    assert not torch.allclose(least_squares, ridge, atol=1e-3)  # the prior moves the estimate, so the test can tell
    for objective, expected in (("mle", least_squares), ("map", ridge)):
        estimate = fit(conjugate.model, (conjugate.x, conjugate.y), "map", objective=objective, map_tolerance=1e-8,
                       seed=1, progress=False)
        theta = conjugate.flatten({name: value[0, 0] for name, value in estimate.samples.items()})
        torch.testing.assert_close(theta, expected, atol=1e-8, rtol=0)
        assert estimate.record.options.objective == objective and estimate.record.map_converged


def test_the_mle_of_a_learned_noise_is_the_root_mean_squared_residual(conjugate):
    model = BayesianMLP(2, 1, hidden=(), likelihood={"name": "gaussian", "scale": None})
    estimate = fit(model, (conjugate.x, conjugate.y), "map", objective="mle", map_tolerance=1e-8, seed=0,
                   progress=False)
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], dim=1)
    residual = conjugate.y - phi @ torch.linalg.lstsq(phi, conjugate.y.unsqueeze(1)).solution.squeeze(1)
    sigma = residual.pow(2).mean().sqrt()
    assert estimate.samples["sigma"].item() == pytest.approx(sigma.item(), rel=1e-8)
    expected = torch.distributions.Normal(0.0, sigma).log_prob(residual).sum().item()
    assert estimate.record.log_likelihood == pytest.approx(expected, rel=1e-10)


@pytest.mark.long
def test_the_mle_of_a_logistic_network_is_unpenalised_logistic_regression():
    # overlapping classes, so the MLE is finite; scikit-learn's Newton solver without a penalty (C = inf), tight tolerance
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = (rng.uniform(size=200) < 1 / (1 + np.exp(-(x @ [1.0, -2.0, 0.5] + 0.3)))).astype(float)
    reference = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=100).fit(x, y)
    model = BayesianMLP(3, 1, hidden=(), likelihood="bernoulli")
    estimate = fit(model, (torch.tensor(x), torch.tensor(y)), "map", objective="mle", map_tolerance=1e-6, seed=0,
                   progress=False)  # within 1e-6 posterior sd (about 0.1 here) of the optimum
    np.testing.assert_allclose(estimate.samples["layers.0.weight"][0, 0, 0].numpy(), reference.coef_[0], atol=1e-6)
    np.testing.assert_allclose(estimate.samples["layers.0.bias"][0, 0].numpy(), reference.intercept_, atol=1e-6)


def test_the_log_joint_recorded_is_the_log_joint_at_the_mode(conjugate, estimate):
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], dim=1)
    mean = conjugate.mean
    log_likelihood = torch.distributions.Normal(phi @ mean, NOISE).log_prob(conjugate.y).sum()
    log_prior = torch.distributions.Normal(0.0, 1.0).log_prob(mean).sum()
    assert estimate.record.log_joint == pytest.approx((log_likelihood + log_prior).item(), abs=1e-6)


def test_the_predictive_is_the_plug_in_one_whose_only_spread_is_the_noise(conjugate, estimate):
    far = torch.tensor([[0.0, 0.0], [30.0, -30.0]])  # at the data and far outside it
    prediction = estimate.predict(far, seed=0)
    phi = torch.cat([far, torch.ones(2, 1)], dim=1)
    assert torch.allclose(prediction.mean, phi @ conjugate.mean, atol=1e-6)
    draws = prediction.draws.shape[0]
    # sd of `draws` N(mean, NOISE^2) draws: within 5 standard errors NOISE / sqrt(2 (draws - 1)) of NOISE
    assert torch.allclose(prediction.std, torch.full((2,), NOISE), atol=5 * NOISE / math.sqrt(2 * (draws - 1)))


@pytest.mark.long
def test_same_seed_same_estimate_and_a_record_that_survives_save_and_load(tmp_path):
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(6,), likelihood={"name": "gaussian", "scale": None})
    a, b = (fit(model, data, "map", map_steps=50, seed=4, progress=False) for _ in range(2))
    assert all(torch.equal(a.samples[name], b.samples[name]) for name in a.samples)
    assert a.record.noise == pytest.approx(a.samples["sigma"].item())
    loaded = Posterior.load(a.save(tmp_path / "map"))
    assert loaded.record == a.record


def test_a_map_that_stops_short_says_so():
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(6,))
    with pytest.warns(RuntimeWarning, match="raise map_max_iter or map_steps"):
        estimate = fit(model, data, "map", map_steps=1, map_max_iter=1, seed=0, progress=False)
    assert not estimate.record.converged
    assert "the MAP did not converge" in estimate.record.problems()[0]


@pytest.mark.long
def test_compare_has_no_loo_for_a_point_estimate_and_rank_leaves_it_out():
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(6,))
    fits = {"map": fit(model, data, "map", map_steps=50, progress=False),
            "laplace": fit(model, data, "laplace", map_steps=50, num_samples=20, progress=False)}
    table = compare(fits, data)
    assert math.isnan(table.loc["map", "loo_elpd"]) and math.isnan(table.loc["map", "waic_elpd"])
    assert not math.isnan(table.loc["laplace", "loo_elpd"]) and table.loc["map", "test_ll"] == table.loc["map", "test_ll"]
    assert list(rank(fits).index) == ["laplace"]


@pytest.mark.parametrize(("options", "message"), [
    (dict(map_steps=0), "map_steps must be a positive integer"),
    (dict(map_tolerance=-1.0), "map_tolerance must be a positive"),
    (dict(num_samples=5), r"method 'map' takes no option\(s\) \['num_samples'\]"),
    (dict(objective="ml"), r"unknown objective 'ml'; choose from \['map', 'mle'\]"),
])
def test_bad_options_are_refused_before_any_work(options, message):
    with pytest.raises(ValueError, match=message):
        fit(BayesianMLP(1, 1, hidden=(3,)), load_toy1d(n_train=10, n_test=5), "map", **options)


def test_the_command_line_takes_the_objective():
    from bnn.cli.arguments import fit_options
    from bnn.cli.main import build_parser

    arguments = build_parser().parse_args(["fit", "--method", "map", "--objective", "mle", "--out", "runs/mle"])
    assert fit_options(arguments)["objective"] == "mle"
    with pytest.raises(SystemExit):  # argparse names the choices
        build_parser().parse_args(["fit", "--method", "map", "--objective", "ml", "--out", "runs/mle"])
