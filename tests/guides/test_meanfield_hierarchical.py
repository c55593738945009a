"""The Bayes-by-Backprop guide under hierarchical priors: Gaussian on the log scales and on the standardised weights,
its density by hand, its ELBO against Pyro's AutoNormal holding the same distribution, its options, and an ARD fit
against AutoNormal's."""

from __future__ import annotations

import math
import warnings

import pyro
import pytest
import torch
from bnn.guides import MeanFieldGuide
from bnn.inference import Posterior, fit
from bnn.models import ARDPrior, BayesianMLP, LayerScalePrior
from pyro import poutine
from pyro.infer import Trace_ELBO
from pyro.infer.autoguide import AutoNormal, init_to_value
from torch.distributions import Normal

GENERATOR = torch.Generator().manual_seed(0)
X = torch.randn(12, 3, generator=GENERATOR)
Y = X[:, 0] - 0.5 * X[:, 1] + 0.1 * torch.randn(12, generator=GENERATOR)
SCALES = ("layers.0.scale", "layers.0.relevance", "layers.1.scale")


def ard_net() -> BayesianMLP:
    return BayesianMLP(3, 1, hidden=(4,), prior={"*": LayerScalePrior(0.5), "layers.0": ARDPrior(2.0)},
                       likelihood={"name": "gaussian", "scale": None})


@pytest.fixture(autouse=True)
def isolated_param_store():
    with pyro.get_param_store().scope():
        yield


def test_it_holds_the_standardised_weights_then_the_log_scales_and_draws_every_latent_site_of_the_program():
    model = ard_net()
    guide = MeanFieldGuide(model)
    assert list(guide.blocks) == [*(f"{site.name}_decentered" for site in model.sites), *SCALES, "sigma"]
    assert guide.analytic_sites == tuple(f"{site.name}_decentered" for site in model.sites)  # N(0, 1): closed form
    assert not guide.local_reparameterisation  # "auto" leaves it out: a weight is a scale times a Gaussian
    trace = poutine.trace(guide).get_trace(X, Y)
    drawn = {name for name, site in trace.nodes.items() if site["type"] == "sample" and name != guide.flat_site}
    assert drawn == set(model.program_latent_shapes)
    locs = guide.site_loc_scale()
    torch.testing.assert_close(locs["layers.0.scale"][0], torch.tensor(2.0).log())  # starts at the prior median
    torch.testing.assert_close(locs["layers.0.relevance"][0], torch.zeros(3))  # HalfCauchy(1)'s median is 1


def test_its_density_is_gaussian_on_the_log_scales_with_their_jacobian_and_on_the_standardised_weights():
    """With the Monte Carlo KL the flat site's log-density is :math:`\\sum_k \\log\\mathcal{N}(u_k; m_k, \\sigma_k^2)`
    over every unconstrained entry minus :math:`\\sum_j \\log\\xi_j` (:math:`\\xi = e^u`): a log-normal per scale."""
    model = ard_net()
    guide = MeanFieldGuide(model, kl="monte-carlo", init_rho=-1.0)
    trace = poutine.trace(guide).get_trace(X, Y)
    flat = trace.nodes[guide.flat_site]
    z, params = flat["value"], guide.flat_parameters()
    by_hand = Normal(params["loc"], params["scale"]).log_prob(z).sum()
    by_hand = by_hand - sum(trace.nodes[name]["value"].log().sum() for name in (*SCALES, "sigma"))
    torch.testing.assert_close(flat["fn"].log_prob(z), by_hand)
    for name in SCALES:
        torch.testing.assert_close(trace.nodes[name]["value"], guide.blocks[name].take(z).exp())


@pytest.mark.long
def test_its_elbo_is_autonormals_for_the_same_distribution_and_the_svi_pair_agrees_draw_by_draw():
    """Both guides hold a mean-field Gaussian over the standardised weights and the log scales: set to the same means
    and standard deviations, their ELBOs have the same expectation (the difference of 40 independent estimates of 100
    particles each within 4 standard errors)."""
    model = ard_net()
    scale = 0.1
    guide = MeanFieldGuide(model, init_rho=math.log(math.expm1(scale)))  # softplus(rho) = 0.1
    locs = {name: loc.detach() for name, (loc, _) in guide.site_loc_scale().items()}
    values = {name: loc.exp() if guide.blocks[name].transform is not None else loc for name, loc in locs.items()}
    reference = AutoNormal(model, init_loc_fn=init_to_value(values=values), init_scale=scale)
    elbo = Trace_ELBO(num_particles=100, vectorize_particles=True, max_plate_nesting=1)
    differences = []
    for seed in range(40):
        pyro.set_rng_seed(seed)
        ours = elbo.loss(model, guide, X, Y)
        pyro.set_rng_seed(1000 + seed)
        differences.append(ours - elbo.loss(model, reference, X, Y))
    differences = torch.tensor(differences)
    assert abs(differences.mean()) < 4 * differences.std() / math.sqrt(len(differences)), differences
    pyro.set_rng_seed(1)
    alone = elbo.loss(model, guide, X, Y)
    pyro.set_rng_seed(1)
    assert elbo.loss(*guide.elbo_pair(), X, Y) == pytest.approx(alone, rel=1e-5)


def test_local_reparameterisation_is_refused_under_a_hierarchical_prior():
    with pytest.raises(ValueError, match=r"local reparameterisation draws each pre-activation from the Gaussian q .* "
                                         r"use local_reparameterisation=False"):
        MeanFieldGuide(ard_net(), local_reparameterisation=True)


@pytest.mark.parametrize("guide, options, reason", [
    ("empirical-bayes", {}, r"its guide 'empirical-bayes' does not cover their latent scales \(the guides that do: "
                            r"'autonormal', 'meanfield', 'full', 'lowrank', 'flow'\)"),
    ("meanfield", {"init_loc": "map"}, "init_loc='map' starts from a joint MAP over weights and scales"),
])
def test_svi_refuses_the_guides_that_cannot_cover_the_scales_naming_those_that_can(guide, options, reason, monkeypatch):
    monkeypatch.setattr("bnn.inference.svi.fit.StepPlan.of", lambda *args: pytest.fail("work started"))
    with pytest.raises(ValueError, match=rf"method 'svi' cannot fit the hierarchical prior\(s\) .* {reason}.*; use svi "
                                         "with guide='autonormal' or 'meanfield', or nuts with init='prior'"):
        fit(ard_net(), (X, Y), "svi", guide=guide, guide_options=options)


@pytest.mark.long
def test_svi_with_it_reports_each_weight_as_its_scale_times_its_standardised_weight(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 20 steps: the ELBO is still rising
        posterior = fit(ard_net(), (X, Y), "svi", guide="meanfield", steps=20, num_samples=10, seed=0, progress=False)
    samples = posterior.samples
    assert set(samples) == set(posterior.model.latent_shapes) and (samples["layers.0.relevance"] > 0).all()
    loaded = Posterior.load(posterior.save(tmp_path / "fit"))
    torch.testing.assert_close(loaded.samples["layers.0.weight"], samples["layers.0.weight"])
    assert torch.isfinite(posterior.predict(X, seed=0).mean).all()


def relevance_fit(guide: str, options: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """SVI with ``guide`` on :math:`y = x_0 + \\varepsilon` (:math:`\\sigma = 0.5`, 30 rows) with an irrelevant second
    input, ``ard`` on the weights of a linear model: the posterior means of :math:`\\log(\\tau\\lambda_j)` and of
    :math:`w_j`."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(30, 2, generator=generator)
    y = x[:, 0] + 0.5 * torch.randn(30, generator=generator)
    model = BayesianMLP(2, 1, hidden=(), prior={"*": "gaussian", "layers.0.weight": ARDPrior(1.0)},
                        likelihood={"name": "gaussian", "scale": 0.5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation
        posterior = fit(model, (x, y), "svi", guide=guide, guide_options=options, steps=2000, lr=0.05, jit=True,
                        num_samples=4000, seed=0, progress=False)
    samples = {name: value[0] for name, value in posterior.samples.items()}
    log_scale = (samples["layers.0.scale"].unsqueeze(-1) * samples["layers.0.relevance"]).log()
    return log_scale.mean(0), samples["layers.0.weight"][:, 0].mean(0)


@pytest.mark.long
def test_ard_gives_the_relevant_input_the_larger_scale_as_autonormal_does():
    """Both guides optimise the ELBO over the same family, so they must land at the same answer up to the noise of
    their final Adam iterates. Measured: log-scale means (-0.15, -2.08) with meanfield, (-0.16, -2.17) with
    autonormal, posterior sds about (0.15, 0.7); the weights (1.06, -0.007) and (1.05, -0.007), sds (0.2, 0.08).
    Tolerances: 0.3 on a log-scale mean (under half the irrelevant one's posterior sd), 0.05 on a weight mean (a
    quarter of the relevant one's sd); the relevant input's scale must exceed the irrelevant one's by 1 (a factor e)."""
    log_scale, weight = relevance_fit("meanfield", {})
    reference_log_scale, reference_weight = relevance_fit("autonormal", {"init_loc": "median"})
    assert log_scale[0] > log_scale[1] + 1, log_scale
    torch.testing.assert_close(log_scale, reference_log_scale, atol=0.3, rtol=0)
    torch.testing.assert_close(weight, reference_weight, atol=0.05, rtol=0)
