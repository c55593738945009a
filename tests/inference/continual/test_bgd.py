"""BGD: its closed-form step is Bayes' rule to first order, its Monte Carlo expectations are unbiased, and weights no
data reach keep their Gaussian."""

from __future__ import annotations

import pytest
import torch
from bnn.datasets.continual import load_moving_regression, load_split_digits
from bnn.inference.continual import ContinualOptions, ContinualSetup
from bnn.inference.continual.bgd import bgd, bgd_update, expected_gradients, first_scale
from bnn.inference.continual.flat_gaussian import FlatGaussian, unlearnt_heads
from bnn.models import BayesianMLP, GaussianLikelihood, get_prior

from tests.experiments.continual.test_run import TINY, small


def _bgd_on_a_stream(observations: torch.Tensor, noise: float, prior: FlatGaussian, per_update: int) -> FlatGaussian:
    """BGD over ``observations`` of :math:`y \\sim \\mathcal{N}(w, \\tau^2)`, ``per_update`` at a time, with the exact
    expectations of the quadratic loss: :math:`\\mathbb{E}[\\nabla L] = \\sum (\\mu - y) / \\tau^2`,
    :math:`\\mathbb{E}[\\epsilon \\nabla L] = m \\sigma / \\tau^2` for :math:`m` observations."""
    state = prior
    for batch in observations.split(per_update):
        grad = (state.mean - batch).sum(0) / noise**2
        grad_noise = batch.shape[0] * state.std / noise**2
        state = bgd_update(state, grad, grad_noise, eta=1.0)
    return state


def test_small_minibatches_compose_to_the_exact_posterior_with_an_error_of_first_order():
    torch.manual_seed(0)
    noise, prior = 2.0, FlatGaussian(torch.tensor([0.3, -1.0]), torch.tensor([0.3, 0.2]))
    observations = torch.tensor([1.5, 0.5]) + noise * torch.randn(256, 2)
    precision = prior.std.pow(-2) + observations.shape[0] / noise**2
    exact_mean = (prior.mean * prior.std.pow(-2) + observations.sum(0) / noise**2) / precision
    exact_std = precision.rsqrt()
    mean_errors, std_errors = [], []
    for per_update in (8, 4, 2, 1):
        state = _bgd_on_a_stream(observations, noise, prior, per_update)
        mean_errors.append(((state.mean - exact_mean).abs() / exact_std).max().item())  # in posterior sds
        std_errors.append(((state.std - exact_std).abs() / exact_std).max().item())
    # first order: the same data in batches half the size halve both errors
    for errors in (mean_errors, std_errors):
        assert [later / earlier for earlier, later in zip(errors, errors[1:])] == pytest.approx([0.5] * 3, abs=0.03)
    assert mean_errors[-1] < 0.03 and std_errors[-1] < 0.002


def test_the_antithetic_expectations_are_exact_for_the_mean_gradient_and_unbiased_for_the_curvature():
    torch.manual_seed(1)
    model = BayesianMLP(3, 1, hidden=(), likelihood=GaussianLikelihood(scale=0.7))
    x, y = torch.randn(20, 3), torch.randn(20)
    state = FlatGaussian(torch.randn(4), torch.tensor([0.3, 0.1, 0.5, 0.2]))
    design = torch.cat([x, torch.ones(20, 1)], 1)  # the weights, then the bias, as model.sites orders them
    assert [site.name for site in model.sites] == ["layers.0.weight", "layers.0.bias"]
    curvature = design.T @ design / 0.7**2  # L is quadratic: g(mu + sigma eps) = g(mu) + H (sigma eps)
    gradient_at_mean = design.T @ (design @ state.mean - y) / 0.7**2
    num = 4000
    expected_grad, expected_grad_noise = expected_gradients(model, x, y, state, num, torch.Generator().manual_seed(2))
    # each pair (eps, -eps) cancels H sigma eps: the mean gradient is exact
    assert torch.allclose(expected_grad, gradient_at_mean, rtol=1e-4, atol=1e-4)
    # a pair gives eps_k (H sigma eps)_k: mean H_kk sigma_k, variance sum_{j != k} H_kj^2 sigma_j^2 + 2 H_kk^2 sigma_k^2
    exact = curvature.diagonal() * state.std
    variance = (curvature * state.std).pow(2).sum(1) + exact.pow(2)
    assert ((expected_grad_noise - exact).abs() < 4 * (variance / (num // 2)).sqrt()).all()
    with pytest.raises(ValueError, match="mc_samples=9 must be even: bgd draws its noise in antithetic pairs"):
        ContinualOptions(mc_samples=9)


def test_a_task_moves_the_shared_layers_and_its_own_head_and_leaves_the_other_heads_as_they_started():
    setup = ContinualSetup(small(load_split_digits()), ContinualOptions(**TINY))
    learned = bgd(setup, 0, {})
    model = setup.model()
    start = FlatGaussian.start(model, None, first_scale(setup), torch.Generator().manual_seed(setup.options.seed))
    carried = get_prior(learned.carry["posterior"])
    assert carried.source == "bgd"
    after = FlatGaussian.start(model, learned.carry["posterior"], 1.0, torch.Generator())
    untouched = unlearnt_heads(setup, model, 1)
    assert untouched.any() and torch.equal(after.mean[untouched], start.mean[untouched])
    assert torch.equal(after.std[untouched], start.std[untouched])
    own_head = unlearnt_heads(setup, model, 0) & ~untouched
    assert own_head.any() and (after.std[own_head] != start.std[own_head]).all()
    assert (after.mean[~own_head & ~untouched] != start.mean[~own_head & ~untouched]).any()
    probabilities = learned.predict(setup.test_data(0)[0])
    assert torch.allclose(probabilities.sum(-1), torch.ones(probabilities.shape[0]))


def test_the_first_scale_follows_the_likelihoods_curvature_and_the_classification_scale_diverges_on_regression():
    regression = small(load_moving_regression(), tasks=1)
    assert first_scale(ContinualSetup(regression, ContinualOptions(**TINY))) == pytest.approx(0.05 * 0.1 / 2)
    assert first_scale(ContinualSetup(small(load_split_digits()), ContinualOptions(**TINY))) == 0.05
    assert first_scale(ContinualSetup(regression, ContinualOptions(**TINY, std_init=0.3))) == 0.3
    learned = bgd(ContinualSetup(regression, ContinualOptions(**TINY)), 0, {})
    assert torch.isfinite(learned.predict(regression.tasks[0].x_test)).all()
    at_the_benchmarks_size = {**TINY, "hidden": (50,), "steps": 20}
    task = load_moving_regression().first_tasks(1)
    bgd(ContinualSetup(task, ContinualOptions(**at_the_benchmarks_size)), 0, {})
    with pytest.raises(FloatingPointError, match=r"bgd: .* at update \d+ of task 0; lower std_init \(now 0.05\)"):
        bgd(ContinualSetup(task, ContinualOptions(**at_the_benchmarks_size, std_init=0.05)), 0, {})


def test_a_mean_eta_no_update_of_a_task_is_stable_at_is_refused_when_the_options_are_built():
    assert ContinualOptions(mean_eta=2999).mean_eta == 2999  # 1500 steps a task by default
    with pytest.raises(ValueError, match=r"mean_eta=3000 cannot settle within a task of steps=1500 updates: .* pass a "
                                         r"mean_eta below 2 x steps = 3000 \(1 in the theory\)"):
        ContinualOptions(mean_eta=3000)
    with pytest.raises(ValueError, match=r"mean_eta=25 .* below 2 x steps = 20"):
        ContinualOptions(**{**TINY, "mean_eta": 25})
