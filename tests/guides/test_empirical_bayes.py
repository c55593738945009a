"""The empirical-Bayes guide: its KL at the optimal prior variance, its ELBO, its fit, and where the prior variances go."""

from __future__ import annotations

import math

import arviz as az
import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO

from guides import GUIDES, EmpiricalBayesGuide, build_guide
from guides.empirical_bayes import empirical_bayes_kl
from guides.kl import gaussian_kl
from inference import Posterior, fit
from inference.cli import main
from models import BayesianMLP
from tests.conjugate import NOISE


@pytest.fixture(autouse=True)
def isolated_param_store():
    with pyro.get_param_store().scope():
        yield


def test_registered_and_built_by_name(conjugate):
    assert "empirical-bayes" in GUIDES.names()
    guide, name = build_guide("empirical-bayes", conjugate.model)
    assert isinstance(guide, EmpiricalBayesGuide) and name == "empirical-bayes"
    with pytest.raises(ValueError, match="init_gamma must be a finite number"):
        EmpiricalBayesGuide(conjugate.model, init_gamma=math.inf)


def precision_kl(loc, scale, precision):
    """The Gaussian KL to N(0, 1/precision)."""
    return gaussian_kl(loc, scale, precision.rsqrt())


def test_the_kl_is_the_gaussian_kl_at_the_optimal_prior_variance_where_its_precision_derivative_vanishes():
    generator = torch.Generator().manual_seed(0)
    loc = torch.randn(50, generator=generator, dtype=torch.float64) * 2
    scale = torch.rand(50, generator=generator, dtype=torch.float64) + 0.05
    optimal = (1 / (loc**2 + scale**2)).requires_grad_()
    kl = precision_kl(loc, scale, optimal)
    torch.testing.assert_close(kl, empirical_bayes_kl(loc / scale))
    torch.testing.assert_close(kl, 0.5 * torch.log1p(loc**2 / scale**2))
    (gradient,) = torch.autograd.grad(kl.sum(), optimal)
    torch.testing.assert_close(gradient, torch.zeros_like(gradient), atol=1e-12, rtol=0)
    # the derivative has power: away from the optimum it is not zero, and the optimum is a minimum
    away = (2 * optimal.detach()).requires_grad_()
    (gradient_away,) = torch.autograd.grad(precision_kl(loc, scale, away).sum(), away)
    assert (gradient_away.abs() > 1e-3).all()
    for factor in (0.8, 1.25):
        assert (precision_kl(loc, scale, factor * optimal.detach()) > kl.detach()).all()


def test_the_elbo_is_the_expected_log_likelihood_minus_the_empirical_bayes_kl_whatever_the_prior(conjugate):
    r"""For the linear model :math:`E_q[\log p(y \mid \beta)]` is closed form; the ELBO estimate averages to
    it minus :math:`\tfrac12\sum\ln(1+\gamma^2)` within 4 standard errors, and the model's prior plays no part."""
    model, x, y = conjugate.model, conjugate.x, conjugate.y
    pyro.set_rng_seed(0)
    guide = EmpiricalBayesGuide(model, init_rho=-1.5, init_gamma=0.5)
    loc_scale = guide.site_loc_scale()
    mu = conjugate.flatten({k: v[0] for k, v in loc_scale.items()}).detach()
    sigma = conjugate.flatten({k: v[1] for k, v in loc_scale.items()}).detach()
    phi = torch.cat([x, torch.ones(len(x), 1)], 1)
    expected_log_lik = (
        -0.5 * len(y) * math.log(2 * math.pi * NOISE**2)
        - (((y - phi @ mu) ** 2).sum() + (phi**2 @ sigma**2).sum()) / (2 * NOISE**2)
    )
    exact = expected_log_lik - empirical_bayes_kl(mu / sigma).sum()
    elbo = Trace_ELBO(num_particles=200, vectorize_particles=True, max_plate_nesting=1)
    estimates = []
    for seed in range(30):
        pyro.set_rng_seed(seed)
        estimates.append(-elbo.loss(model, guide, x, y))
    estimates = torch.tensor(estimates)
    assert abs(estimates.mean() - exact) < 4 * estimates.std() / len(estimates) ** 0.5
    pyro.set_rng_seed(0)
    gaussian_prior = -elbo.loss(model, guide, x, y)
    laplace_model = BayesianMLP(x.shape[1], 1, hidden=(), prior="laplace", likelihood=model.likelihood)
    pyro.set_rng_seed(0)
    laplace_prior = -elbo.loss(laplace_model, EmpiricalBayesGuide(laplace_model, init_rho=-1.5, init_gamma=0.5), x, y)
    assert laplace_prior == pytest.approx(gaussian_prior, rel=1e-9)


def exact_empirical_bayes_optimum(conjugate) -> tuple[torch.Tensor, torch.Tensor]:
    """The means and variances maximising the closed-form objective E_q[log lik] - KL, by L-BFGS."""
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], 1)
    mu = conjugate.mean.clone().requires_grad_()
    log_sigma = (0.5 * conjugate.meanfield_var.log()).clone().requires_grad_()
    optimiser = torch.optim.LBFGS([mu, log_sigma], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        variance = torch.exp(2 * log_sigma)
        expected_residual = ((conjugate.y - phi @ mu) ** 2).sum() + (phi**2 @ variance).sum()
        loss = expected_residual / (2 * NOISE**2) + 0.5 * torch.log1p(mu**2 / variance).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    return mu.detach(), torch.exp(2 * log_sigma).detach()


def test_fit_reaches_the_exact_empirical_bayes_optimum_and_stores_the_prior_variances(conjugate, tmp_path):
    """Means within 0.2 posterior sd and prior variances mu^2 + sigma^2 within 5% of the optimum of the
    closed-form objective (measured: 0.08 sd, 1.3%); the prior variances reach the InferenceData and the saved
    posterior."""
    mu, variance = exact_empirical_bayes_optimum(conjugate)
    posterior = fit(
        conjugate.model, (conjugate.x, conjugate.y), guide="empirical-bayes", guide_options={"init_rho": -2.5},
        steps=2500, lr=0.05, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8, jit=True, seed=1,
        progress=False, num_draws=10,
    )
    guide = posterior.extras["guide"]
    loc = conjugate.flatten({k: v[0] for k, v in guide.site_loc_scale().items()})
    torch.testing.assert_close(loc, mu, atol=0.2 * variance.sqrt().min().item(), rtol=0)
    prior_variances = guide.prior_variances()
    torch.testing.assert_close(conjugate.flatten(prior_variances), mu**2 + variance, rtol=0.05, atol=0)
    stored = {name: torch.as_tensor(posterior.constants[f"prior_variance.{name}"]) for name in prior_variances}
    torch.testing.assert_close(stored, prior_variances)
    idata = posterior.to_inference_data()
    assert idata.constant_data["prior_variance.layers.0.weight"].shape == (1, 2)
    loaded = Posterior.load(posterior.save(tmp_path / "eb"))
    assert set(loaded.constants) == {f"prior_variance.{name}" for name in prior_variances}
    torch.testing.assert_close(torch.as_tensor(loaded.constants["prior_variance.layers.0.bias"]),
                               prior_variances["layers.0.bias"])


def test_cli_fits_with_a_laplace_prior_and_saves_the_prior_variances(tmp_path):
    out = tmp_path / "eb"
    main(["fit", "--dataset", "toy1d", "--guide", "empirical-bayes", "--prior", "laplace", "--hidden", "8",
          "--steps", "20", "--num-draws", "20", "--out", str(out), "--quiet"])
    idata = az.from_netcdf(str(out / "posterior.nc"))
    assert idata.constant_data["prior_variance.layers.0.weight"].shape == (8, 1)
    assert bool((idata.constant_data["prior_variance.layers.1.bias"] > 0).all())
