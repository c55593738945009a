"""Posterior.as_prior(): the posterior of one data half as the prior of the next equals the posterior of all the data.

Bayesian linear regression with a design whose columns are orthogonal within each half (``[x, 1]`` with
``Phi_h^T Phi_h = n_h I``): the exact posterior of each half, and of both, has a diagonal precision, so a prior of
independent Gaussians carries it exactly, and the two steps compose to the joint posterior
(``Lambda = Phi^T Phi / sigma^2 + Lambda_prior``, ``m = Lambda^{-1}(Phi^T y / sigma^2 + Lambda_prior m_prior)``).
"""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior, PosteriorPrior
from pyro.infer import JitTrace_ELBO

from tests.support.conjugate import ConjugateProblem, check_meanfield_optimum, log_scale_step, stationary_sgd_chain

NOISE, PRIOR_SCALE, HALF = 0.5, 1.0, 20
BETA, BIAS = torch.tensor([0.8, -0.5]), 0.3
MAP_TOLERANCE = 1e-8  # the largest Newton decrement (posterior standard deviations) the MAP polish accepts


@pytest.fixture(scope="module", autouse=True)
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(autouse=True)
def isolated_param_store():
    with pyro.get_param_store().scope():
        yield


def orthogonal_half(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``HALF`` inputs whose columns are orthogonal to each other and to the intercept, squared norm ``HALF``."""
    generator = torch.Generator().manual_seed(seed)
    basis, _ = torch.linalg.qr(torch.cat([torch.ones(HALF, 1), torch.randn(HALF, 2, generator=generator)], dim=1))
    x = basis[:, 1:] * HALF**0.5
    return x, x @ BETA.double() + BIAS + NOISE * torch.randn(HALF, generator=generator)


def exact_posterior(x, y, prior_loc, prior_var) -> tuple[torch.Tensor, torch.Tensor]:
    """Means and variances of the exact posterior over ``[weight..., bias]``, checked to be diagonal."""
    phi = torch.cat([x, torch.ones(x.shape[0], 1)], dim=1)
    precision = phi.T @ phi / NOISE**2 + torch.diag(1 / prior_var)
    assert torch.allclose(precision, torch.diag(precision.diagonal()), atol=1e-9)  # the design keeps it diagonal
    variance = 1 / precision.diagonal()
    return variance * (phi.T @ y / NOISE**2 + prior_loc / prior_var), variance


def flat(prior: PosteriorPrior) -> tuple[torch.Tensor, torch.Tensor]:
    """The prior's means and variances as ``[weight..., bias]``."""
    loc = torch.cat([prior.loc["layers.0.weight"].reshape(-1), prior.loc["layers.0.bias"]])
    scale = torch.cat([prior.scale["layers.0.weight"].reshape(-1), prior.scale["layers.0.bias"]])
    return loc, scale**2


def linear_model(prior=None) -> BayesianMLP:
    return BayesianMLP(2, 1, hidden=(), prior=GaussianPrior(PRIOR_SCALE) if prior is None else prior,
                       likelihood=GaussianLikelihood(scale=NOISE))


FIRST_PRIOR = (torch.zeros(3), torch.full((3,), PRIOR_SCALE**2))


@pytest.mark.long
@pytest.mark.parametrize("structure", ["diag", "full"])
def test_laplace_in_sequence_is_the_posterior_of_all_the_data(structure):
    (x1, y1), (x2, y2) = orthogonal_half(1), orthogonal_half(2)
    options = {"method": "laplace", "structure": structure, "map_tolerance": MAP_TOLERANCE, "seed": 0,
               "progress": False, "num_samples": 10, "tune_prior_precision": False}
    first = fit(linear_model(), (x1, y1), **options)
    second = fit(linear_model(first.as_prior()), (x2, y2), **options)
    mean, variance = exact_posterior(torch.cat([x1, x2]), torch.cat([y1, y2]), *FIRST_PRIOR)
    loc, prior_variance = flat(second.as_prior())
    # each MAP lies within map_tolerance posterior standard deviations of its mode, and no standard deviation exceeds
    # 1 / sqrt(smallest precision, 20 / 0.5^2 + 1 = 81): off by 1e-8 / 9 each, and the first's error moves the second's
    # by no more: 2e-8 / 9 < 1e-8
    torch.testing.assert_close(loc, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(prior_variance, variance, rtol=1e-9, atol=0)  # curvature of a quadratic: exact
    assert second.as_prior().source == "laplace"


@pytest.mark.long
def test_moment_matching_the_exact_gaussian_gives_its_moments_within_monte_carlo_error():
    """Draws of the exact half-1 posterior, moment matched: means within 4 standard errors sd/sqrt(S), variances
    within 4 of theirs, sqrt(2/(S-1)) var (Gaussian draws)."""
    x1, y1 = orthogonal_half(1)
    mean, variance = exact_posterior(x1, y1, *FIRST_PRIOR)
    draws = mean + variance.sqrt() * torch.randn(4000, 3, generator=torch.Generator().manual_seed(3))
    samples = {"layers.0.weight": draws[None, :, :2].reshape(1, 4000, 1, 2), "layers.0.bias": draws[None, :, 2:]}
    exact = Posterior(linear_model(), samples, x1, y1, fit(linear_model(), (x1, y1), method="laplace", progress=False,
                                                           num_samples=2).record)
    with pytest.raises(ValueError, match="moment_matching=True"):
        exact.as_prior()
    prior = exact.as_prior(moment_matching=True)
    loc, matched_variance = flat(prior)
    assert prior.source == "moment-matching"
    assert ((loc - mean).abs() < 4 * (variance / 4000).sqrt()).all()
    assert ((matched_variance - variance).abs() < 4 * variance * (2 / 3999) ** 0.5).all()


def _meanfield_fit(model, data) -> tuple[Posterior, torch.Tensor, torch.Tensor]:
    posterior = fit(model, data, guide="meanfield", guide_options={"init_rho": -3.0, "kl": "closed-form"}, steps=1000,
                    lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8, jit=True, seed=1,
                    progress=False, num_samples=10)
    guide = posterior.extras["guide"]

    def loc_and_variance():
        loc, variance = flat(PosteriorPrior(*(  # the guide's current means and scales
            {name: pair[k] for name, pair in guide.site_loc_scale().items()} for k in (0, 1))))
        return torch.cat([loc, variance]).detach()

    (loc_rho,) = guide.parameters()
    is_loc = torch.tensor([[True], [False]]).expand_as(loc_rho)
    elbo = JitTrace_ELBO(num_particles=8, vectorize_particles=True, max_plate_nesting=1, ignore_jit_warnings=True)
    elbo_model, scored_guide = guide.elbo_pair()
    fitted = loc_and_variance()
    chain = stationary_sgd_chain(lambda: elbo.differentiable_loss(elbo_model, scored_guide, *data), [loc_rho],
                                 log_scale_step([loc_rho], [is_loc]), loc_and_variance, steps=1000)
    return posterior, chain, fitted


@pytest.mark.slow
def test_vcl_in_sequence_reaches_each_mean_field_optimum_and_they_compose_to_the_joint_posterior():
    """Each mean-field fit reaches the exact optimum under the prior it was given (4 batch-means standard errors,
    :func:`tests.support.conjugate.check_meanfield_optimum`); those optima compose exactly to the joint posterior."""
    (x1, y1), (x2, y2) = orthogonal_half(1), orthogonal_half(2)
    first, chain, fitted = _meanfield_fit(linear_model(), (x1, y1))
    mean1, variance1 = exact_posterior(x1, y1, *FIRST_PRIOR)
    check_meanfield_optimum(ConjugateProblem(linear_model(), x1, y1, mean1, torch.diag(variance1), variance1), chain,
                            fitted)
    carried = first.as_prior()
    second, chain, fitted = _meanfield_fit(linear_model(carried), (x2, y2))
    mean2, variance2 = exact_posterior(x2, y2, *flat(carried))
    check_meanfield_optimum(ConjugateProblem(linear_model(), x2, y2, mean2, torch.diag(variance2), variance2), chain,
                            fitted)
    joint = exact_posterior(torch.cat([x1, x2]), torch.cat([y1, y2]), *FIRST_PRIOR)
    composed = exact_posterior(x2, y2, mean1, variance1)
    torch.testing.assert_close(composed, joint)


def test_vcl_short_run_moves_towards_the_joint_posterior():
    """The default run's short version: 300 steps per half; the second posterior's means are within 0.05 of the
    joint posterior's (its standard deviations are about 0.08, the SVI noise at this rate about 0.01)."""
    (x1, y1), (x2, y2) = orthogonal_half(1), orthogonal_half(2)
    options = {"guide": "meanfield", "steps": 300, "lr": 0.02, "lr_schedule": "constant", "num_particles": 4, "seed": 0,
               "progress": False, "num_samples": 10}
    first = fit(linear_model(), (x1, y1), **options)
    second = fit(linear_model(first.as_prior()), (x2, y2), **options)
    joint_mean, _ = exact_posterior(torch.cat([x1, x2]), torch.cat([y1, y2]), *FIRST_PRIOR)
    loc, _ = flat(second.as_prior())
    assert (loc - joint_mean).abs().max() < 0.05, loc - joint_mean


@pytest.mark.long
def test_the_prior_survives_save_and_load_of_a_posterior_fitted_under_it(tmp_path):
    x1, y1 = orthogonal_half(1)
    carried = fit(linear_model(), (x1, y1), method="laplace", progress=False, num_samples=5).as_prior()
    posterior = fit(linear_model(carried), orthogonal_half(2), method="laplace", progress=False, num_samples=5)
    loaded = Posterior.load(posterior.save(tmp_path / "p"))
    assert loaded.model.prior["layers.0.weight"] == carried
    with pytest.raises(ValueError, match="loaded from disk.*moment_matching=True"):
        loaded.as_prior()
    assert loaded.as_prior(moment_matching=True).source == "moment-matching"


@pytest.mark.long
def test_a_last_layer_laplace_posterior_is_refused():
    model = BayesianMLP(2, 1, hidden=(3,), likelihood=GaussianLikelihood(scale=NOISE))
    posterior = fit(model, orthogonal_half(1), method="laplace", structure="last-layer", progress=False, num_samples=5)
    with pytest.raises(ValueError, match="last-layer.*no spread.*structure='diag'"):
        posterior.as_prior()


def test_a_prior_from_another_models_posterior_is_refused():
    carried = fit(linear_model(), orthogonal_half(1), method="laplace", progress=False, num_samples=5).as_prior()
    with pytest.raises(ValueError, match="holds the sites .* not 'layers.1.weight'.*another model"):
        BayesianMLP(2, 1, hidden=(1,), prior=carried)  # layers.0 has the carried shapes, layers.1 is new
    with pytest.raises(ValueError, match="shape \\(1, 2\\).*shape \\(1, 3\\).*another model"):
        BayesianMLP(3, 1, hidden=(), prior=carried)


def test_moment_matching_is_refused_without_spread_and_with_a_non_bool():
    posterior = fit(linear_model(), orthogonal_half(1), method="laplace", progress=False, num_samples=5)
    frozen = Posterior(posterior.model, {k: v[:, :1].expand(1, 3, *v.shape[2:]) for k, v in posterior.samples.items()},
                       posterior.x, posterior.y, posterior.record)
    with pytest.raises(ValueError, match="do not vary"):
        frozen.as_prior(moment_matching=True)
    with pytest.raises(ValueError, match="moment_matching must be True or False"):
        posterior.as_prior(moment_matching="yes")


def test_an_autonormal_guide_gives_its_own_means_and_scales():
    """AutoNormal is mean-field too: its 4,000 draws have the prior's means within 4 standard errors (sd/sqrt(S))
    and its standard deviations within 4 of theirs (sd sqrt(1/(2(S-1))))."""
    posterior = fit(linear_model(), orthogonal_half(1), guide="autonormal", steps=50, seed=0, progress=False,
                    num_samples=4000)
    prior = posterior.as_prior()
    assert prior.source == "autonormal" and not list(pyro.get_param_store().keys())  # read in the fit's own store
    draws = posterior.draws()
    for name in prior.loc:
        assert ((draws[name].mean(0) - prior.loc[name]).abs() < 4 * prior.scale[name] / 4000**0.5).all()
        assert ((draws[name].std(0) / prior.scale[name] - 1).abs() < 4 * (1 / 7998) ** 0.5).all()


@pytest.mark.parametrize("guide", ["autonormal", "meanfield"])
def test_a_variational_posterior_under_a_hierarchical_prior_is_carried_on_by_its_draws_only(guide):
    """Its guide is over the scales and the standardised weights, not the weights: refused without moment matching,
    which gives each weight exactly the mean and standard deviation of its draws."""
    model = BayesianMLP(2, 1, hidden=(3,), prior="layer-scale", likelihood=GaussianLikelihood(scale=NOISE))
    posterior = fit(model, orthogonal_half(1), guide=guide, steps=20, seed=0, progress=False, num_samples=50)
    with pytest.raises(ValueError, match=r"hierarchical prior\(s\) 'layer-scale' \(layers.0\).*moment_matching=True"):
        posterior.as_prior()
    prior, draws = posterior.as_prior(moment_matching=True), posterior.draws()
    assert prior.source == "moment-matching"
    for name in prior.loc:
        torch.testing.assert_close(prior.loc[name], draws[name].mean(0))
        torch.testing.assert_close(prior.scale[name], draws[name].std(0))
