from __future__ import annotations

import math

import pytest
import torch
from bnn.inference import fit
from bnn.inference.laplace.curvature import output_hessian
from bnn.models import BayesianMLP, BernoulliLikelihood, CategoricalLikelihood, GaussianLikelihood, get_likelihood
from bnn.models.likelihoods import HeteroscedasticGaussianLikelihood


def test_gaussian_fixed_noise_distribution():
    f = torch.randn(4, 7, 1)
    d = GaussianLikelihood(scale=0.3).distribution(f, {})
    assert d.batch_shape == (4, 7)
    torch.testing.assert_close(d.stddev, torch.full((4, 7), 0.3))


def test_gaussian_learned_noise_broadcasts_per_draw():
    likelihood = GaussianLikelihood(scale=None, noise_prior_scale=2.0)
    assert set(likelihood.latent_priors()) == {"sigma"}
    sigma = torch.tensor([0.1, 0.2, 0.3])
    d = likelihood.distribution(torch.zeros(3, 5, 1), {"sigma": sigma})
    torch.testing.assert_close(d.stddev, sigma.unsqueeze(-1).expand(3, 5))


@pytest.mark.parametrize("outputs", [1, 2])
def test_the_most_likely_learned_noise_is_the_root_mean_square_residual(outputs):
    generator = torch.Generator().manual_seed(0)
    f, y = torch.randn(3, 50, outputs, generator=generator), torch.randn(50, outputs, generator=generator)
    y = y[:, 0] if outputs == 1 else y
    likelihood = GaussianLikelihood(scale=None)
    sigma = likelihood.most_likely_latents(f, y)["sigma"]
    torch.testing.assert_close(sigma, (y.reshape(50, outputs) - f).square().mean(dim=(1, 2)).sqrt())
    sigma.requires_grad_()
    likelihood.distribution(f, {"sigma": sigma}).log_prob(y).sum().backward()
    torch.testing.assert_close(sigma.grad, torch.zeros(3), rtol=0, atol=1e-3)  # the likelihood's stationary point
    assert GaussianLikelihood(scale=0.3).most_likely_latents(f, y) == {}
    assert BernoulliLikelihood().most_likely_latents(f, (y > 0).float()) == {}


def test_gaussian_multi_output_is_one_event_per_example():
    d = GaussianLikelihood(scale=1.0).distribution(torch.zeros(2, 5, 3), {})
    assert d.batch_shape == (2, 5) and d.event_shape == (3,)


def test_bernoulli_and_categorical_use_logits():
    f = torch.randn(2, 5, 1)
    torch.testing.assert_close(BernoulliLikelihood().distribution(f, {}).probs, torch.sigmoid(f[..., 0]))
    f = torch.randn(2, 5, 4)
    torch.testing.assert_close(CategoricalLikelihood().distribution(f, {}).probs, torch.softmax(f, -1))


@pytest.mark.parametrize(
    "likelihood, y, out, message",
    [
        (BernoulliLikelihood(), torch.tensor([0.0, 2.0]), 1, r"binary labels must be 0 or 1; found \[2.0\]"),
        (BernoulliLikelihood(), torch.tensor([[0.0], [1.0]]), 1, "must be a 1-D tensor"),
        (CategoricalLikelihood(), torch.tensor([0, 3]), 3, r"must lie in 0..2 for 3 classes"),
        (CategoricalLikelihood(), torch.tensor([0.5, 1.0]), 3, "whole numbers"),
        (CategoricalLikelihood(), torch.tensor([-1, 1]), 3, r"must lie in 0..2"),
        (GaussianLikelihood(), torch.zeros(4, 2), 1, r"must have shape \(4,\)"),
        (GaussianLikelihood(), torch.zeros(4), 2, r"must have shape \(4, 2\)"),
    ],
)
def test_targets_outside_the_support_are_refused(likelihood, y, out, message):
    with pytest.raises(ValueError, match=message):
        likelihood.check_targets(y, out)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GaussianLikelihood(scale=0.0), "scale must be a positive"),
        (lambda: GaussianLikelihood(scale=None, noise_prior_scale=-1.0), "noise_prior_scale must be a positive"),
        (lambda: BernoulliLikelihood().check_out_features(2), "needs out_features=1"),
        (lambda: CategoricalLikelihood().check_out_features(1), "needs out_features >= 2"),
        (lambda: get_likelihood("poisson"), "unknown likelihood 'poisson'"),
    ],
)
def test_bad_likelihood_options_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_categorical_targets_become_long():
    assert CategoricalLikelihood().check_targets(torch.tensor([0.0, 2.0]), 3).dtype == torch.long


# ----------------------------------------------------------------- heteroscedastic Gaussian
def test_heteroscedastic_log_density_is_the_normal_with_the_networks_scale():
    likelihood = HeteroscedasticGaussianLikelihood(min_scale=0.01)
    f, y = torch.randn(3, 7, 2), torch.randn(7)
    scale = torch.nn.functional.softplus(f[..., 1]) + 0.01
    d = likelihood.distribution(f, {})
    assert d.batch_shape == (3, 7) and d.event_shape == ()
    torch.testing.assert_close(d.log_prob(y), torch.distributions.Normal(f[..., 0], scale).log_prob(y))
    torch.testing.assert_close(d.stddev, scale)


def test_heteroscedastic_several_targets_are_one_event_per_example():
    likelihood = HeteroscedasticGaussianLikelihood()
    f, y = torch.randn(2, 5, 6), torch.randn(5, 3)
    scale = torch.nn.functional.softplus(f[..., 3:]) + likelihood.min_scale
    d = likelihood.distribution(f, {})
    assert d.batch_shape == (2, 5) and d.event_shape == (3,)
    torch.testing.assert_close(d.log_prob(y), torch.distributions.Normal(f[..., :3], scale).log_prob(y).sum(-1))


def test_heteroscedastic_sizes_the_network_and_reads_its_targets():
    likelihood = get_likelihood({"name": "heteroscedastic-gaussian", "min_scale": 0.05})
    assert likelihood == HeteroscedasticGaussianLikelihood(0.05) and get_likelihood(likelihood.config()) == likelihood
    assert likelihood.network_outputs(3) == 6 and GaussianLikelihood().network_outputs(3) == 3
    assert likelihood.check_targets(torch.zeros(4, dtype=torch.float64), 2).dtype == torch.get_default_dtype()
    assert likelihood.check_targets(torch.zeros(4, 3), 6).shape == (4, 3)
    model = BayesianMLP(1, likelihood.network_outputs(1), hidden=(3,), likelihood=likelihood)
    assert model.latent_shapes.keys() == {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: HeteroscedasticGaussianLikelihood(min_scale=0.0), "min_scale must be a positive finite number"),
        (lambda: HeteroscedasticGaussianLikelihood(min_scale=True), "min_scale must be a positive finite number"),
        (lambda: BayesianMLP(1, 1, likelihood="heteroscedastic-gaussian"), r"needs out_features = 2 x targets .* got 1"),
        (lambda: HeteroscedasticGaussianLikelihood().check_targets(torch.zeros(4, 2), 2), r"must have shape \(4,\)"),
        (lambda: HeteroscedasticGaussianLikelihood().check_targets(torch.zeros(4), 4), r"must have shape \(4, 2\)"),
    ],
)
def test_heteroscedastic_bad_options_and_shapes_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_heteroscedastic_fit_predicts_more_noise_where_the_data_have_more():
    """Noise 0.05 on the left half, 0.5 on the right: the scale of a deep ensemble (the paper's setting) follows it."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(200, 1, generator=generator) * 2 - 1
    y = torch.sin(2 * x[:, 0]) + torch.where(x[:, 0] < 0, 0.05, 0.5) * torch.randn(200, generator=generator)
    likelihood = HeteroscedasticGaussianLikelihood()
    model = BayesianMLP(1, 2, hidden=(10,), likelihood=likelihood)
    posterior = fit(model, (x, y), "ensemble", num_members=2, member_method="sequential", map_steps=300, map_tolerance=1.0,
                    progress=False)
    grid = torch.tensor([[-0.7], [-0.3], [0.3], [0.7]])
    _, scale = likelihood.mean_and_scale(posterior.function_draws(grid, posterior.draws()))
    left, right = scale[:, :2, 0], scale[:, 2:, 0]  # per member
    assert ((0.03 < left) & (left < 0.08)).all() and ((0.35 < right) & (right < 0.8)).all(), scale
    std = posterior.predict(grid).std
    assert (std[2:] > 5 * std[:2]).all(), std


def test_the_ggn_of_a_heteroscedastic_gaussian_is_its_fisher():
    """The Hessian of -log N(y; m, s^2) in (m, r) is a polynomial of degree 2 in y - m, so its mean over y = m -+ s (the
    first two moments of y) is its exact expectation, the Fisher the GGN uses."""
    likelihood = HeteroscedasticGaussianLikelihood()
    f = torch.tensor([[0.3, -1.2], [-0.5, 0.8]], dtype=torch.float64)
    mean, scale = likelihood.mean_and_scale(f)

    def negative_log_likelihood(row: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -likelihood.distribution(row.unsqueeze(0), {}).log_prob(y.reshape(1)).sum()

    for i in range(f.shape[0]):
        expected = sum(torch.func.hessian(negative_log_likelihood)(f[i], mean[i, 0] + sign * scale[i, 0]) for sign in (-1, 1)) / 2
        torch.testing.assert_close(output_hessian(likelihood, f[i : i + 1], {})[0], expected)


@pytest.mark.long
@pytest.mark.parametrize("hessian", ["ggn", "exact"])
def test_laplace_fits_a_heteroscedastic_model_and_predicts_by_monte_carlo(hessian):
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(60, 1, generator=generator) * 2 - 1
    y = torch.sin(2 * x[:, 0]) + torch.where(x[:, 0] < 0, 0.05, 0.5) * torch.randn(60, generator=generator)
    model = BayesianMLP(1, 2, hidden=(3,), likelihood="heteroscedastic-gaussian")
    posterior = fit(model, (x, y), "laplace", hessian=hessian, structure="last-layer", map_steps=300, map_tolerance=1.0,
                    num_samples=200, progress=False)
    assert posterior.linearization is None and posterior.default_predictive.value == "mc"
    assert math.isfinite(posterior.record.log_marginal_likelihood)
    std = posterior.predict(torch.tensor([[-0.6], [0.6]])).std
    assert std[1] > 3 * std[0], std  # the noisy right half
