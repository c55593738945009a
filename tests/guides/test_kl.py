"""The KL estimators of the mean-field guides, against the closed form."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.guides import KLEstimator, MeanFieldGuide
from bnn.guides.kl import gaussian_kl, get_kl_estimator, site_estimators
from bnn.models import BayesianMLP, GaussianPrior, LaplacePrior, ScaleMixturePrior
from pyro import poutine

MIXED = {"*": GaussianPrior(0.7), "layers.1.weight": LaplacePrior(0.5), "layers.1.bias": ScaleMixturePrior()}


def model(prior=MIXED) -> BayesianMLP:
    return BayesianMLP(2, 1, hidden=(4,), prior=prior, likelihood={"name": "gaussian", "scale": 0.3})


def test_auto_resolves_per_site_and_closed_form_refuses_non_gaussian_sites():
    m = model()
    resolved = site_estimators("auto", m.sites, m.prior)
    assert resolved == {
        "layers.0.weight": KLEstimator.CLOSED_FORM, "layers.0.bias": KLEstimator.CLOSED_FORM,
        "layers.1.weight": KLEstimator.MONTE_CARLO, "layers.1.bias": KLEstimator.MONTE_CARLO,
    }
    assert set(site_estimators(KLEstimator.MONTE_CARLO, m.sites, m.prior).values()) == {KLEstimator.MONTE_CARLO}
    with pytest.raises(ValueError, match="closed-form KL needs a Gaussian prior.*layers.1.weight.*LaplacePrior"):
        site_estimators("closed-form", m.sites, m.prior)
    with pytest.raises(ValueError, match="unknown kl estimator 'exact'; choose from"):
        get_kl_estimator("exact")


def test_gaussian_kl_matches_torch():
    loc, scale = torch.randn(20), torch.rand(20) + 0.1
    expected = torch.distributions.kl_divergence(
        torch.distributions.Normal(loc, scale), torch.distributions.Normal(0.0, 0.4)
    )
    torch.testing.assert_close(gaussian_kl(loc, scale, 0.4), expected)


def weight_kl_terms(guide: MeanFieldGuide, m: BayesianMLP, draws: int, x, y) -> torch.Tensor:
    r"""Per draw, the ELBO's latent part :math:`\sum_s [\ell_s - \log p(w_s)]` of the weights, shaped ``(draws,)``."""
    with pyro.plate("draws", draws, dim=-2):
        guide_trace = poutine.trace(guide).get_trace(x, y)
        model_trace = poutine.trace(poutine.replay(m, trace=guide_trace)).get_trace(x, y)
    guide_trace.compute_log_prob()
    model_trace.compute_log_prob()
    log_q = guide_trace.nodes[guide.flat_site]["log_prob"]
    log_p = sum(model_trace.nodes[site.name]["log_prob"] for site in m.sites)
    return (log_q - log_p).reshape(draws)


def test_monte_carlo_kl_averages_to_the_closed_form():
    """On a Gaussian prior, log q - log p at the guide's draws averages to the analytic KL within 4 standard errors."""
    m = model(GaussianPrior(0.7))
    x, y = torch.randn(5, 2), torch.randn(5)
    draws = 20000
    with pyro.get_param_store().scope(), torch.no_grad():
        pyro.set_rng_seed(0)
        guide = MeanFieldGuide(m, init_rho=-1.0, kl="monte-carlo")
        estimates = weight_kl_terms(guide, m, draws, x, y)
        exact = sum(gaussian_kl(loc, scale, 0.7).sum() for loc, scale in guide.site_loc_scale().values())
    standard_error = estimates.std() / draws**0.5
    assert abs(estimates.mean() - exact) < 4 * standard_error
    assert standard_error < 0.05 * exact  # the check has power: the error bar is small against the KL


def test_closed_form_guide_contributes_exactly_the_analytic_kl():
    m = model(GaussianPrior(0.7))
    x, y = torch.randn(5, 2), torch.randn(5)
    with pyro.get_param_store().scope(), torch.no_grad():
        pyro.set_rng_seed(0)
        guide = MeanFieldGuide(m, init_rho=-1.0, kl="closed-form")
        terms = weight_kl_terms(guide, m, 50, x, y)
        exact = sum(gaussian_kl(loc, scale, 0.7).sum() for loc, scale in guide.site_loc_scale().values())
    torch.testing.assert_close(terms, exact.expand(50), rtol=1e-5, atol=1e-4)


def test_the_closed_form_kl_with_a_prior_mean_is_torchs():
    generator = torch.Generator().manual_seed(0)
    loc, prior_loc = torch.randn(5, generator=generator), torch.randn(5, generator=generator)
    scale, prior_scale = torch.rand(5, generator=generator) + 0.1, torch.rand(5, generator=generator) + 0.1
    expected = torch.distributions.kl_divergence(torch.distributions.Normal(loc, scale),
                                                 torch.distributions.Normal(prior_loc, prior_scale))
    torch.testing.assert_close(gaussian_kl(loc, scale, prior_scale, prior_loc), expected)
