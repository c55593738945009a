"""The Bayes-by-Backprop guide: draws, the ELBO it gives, its options, isolation, exactness, CLI."""

from __future__ import annotations

import json

import pyro
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.guides import GUIDES, MeanFieldGuide, build_guide
from bnn.guides.flat_normal import prior_median
from bnn.guides.kl import gaussian_kl
from bnn.inference import fit
from bnn.inference.core.guide_draws import sample_guide
from bnn.inference.map_search.map_estimate import map_weights
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior, LaplacePrior, ScaleMixturePrior
from pyro.infer import Trace_ELBO

from bnn.cli.main import main
from tests.support.conjugate import check_meanfield_optimum, meanfield_chain

MIXED = {"*": GaussianPrior(0.7), "layers.1.weight": LaplacePrior(0.5), "layers.1.bias": ScaleMixturePrior()}


def small_model(prior=MIXED, noise=None) -> BayesianMLP:
    return BayesianMLP(2, 1, hidden=(4,), prior=prior, likelihood={"name": "gaussian", "scale": noise})


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(12, 2, generator=generator), torch.randn(12, generator=generator)


@pytest.fixture(autouse=True)
def isolated_param_store():
    with pyro.get_param_store().scope():
        yield


def test_registered_and_built_by_name():
    assert "meanfield" in GUIDES.names()
    guide, name = build_guide("meanfield", small_model(), init_rho=-2.0)
    assert isinstance(guide, MeanFieldGuide) and name == "meanfield"


def test_draws_have_the_sites_shapes_alone_under_particles_and_as_posterior_draws(data):
    x, y = data
    m = small_model()
    guide = MeanFieldGuide(m)
    values = guide(x, y)
    assert {k: tuple(v.shape) for k, v in values.items()} == {k: tuple(s) for k, s in m.latent_shapes.items()}
    with pyro.plate("particles", 3, dim=-2):
        values = guide(x, y)
    assert values["layers.0.weight"].shape == (3, 1, 4, 2) and values["sigma"].shape == (3, 1)
    draws = sample_guide(guide, 7, m.latent_shapes, x, y)
    assert draws["layers.1.weight"].shape == (7, 1, 4) and bool((draws["sigma"] > 0).all())


@pytest.mark.parametrize("num_particles", [1, 5])
def test_the_svi_pair_gives_the_same_elbo_draw_by_draw(data, num_particles):
    """elbo_pair skips the prior terms the guide cancels; per draw the ELBO is unchanged (up to rounding)."""
    x, y = data
    m = small_model()
    guide = MeanFieldGuide(m, init_rho=-1.0)
    elbo = Trace_ELBO(num_particles=num_particles, vectorize_particles=num_particles > 1, max_plate_nesting=1)
    pyro.set_rng_seed(1)
    alone = elbo.loss(m, guide, x, y)
    pyro.set_rng_seed(1)
    paired = elbo.loss(*guide.elbo_pair(), x, y)
    assert paired == pytest.approx(alone, rel=1e-5)


def test_closed_form_and_monte_carlo_elbos_agree_in_expectation(data):
    """The same draws (same seeds) scored with both estimators: their difference is the KL's
    Monte Carlo error, whose mean over 40 seeds is zero within 4 standard errors."""
    x, y = data
    m = small_model(GaussianPrior(0.7), noise=0.5)
    elbo = Trace_ELBO(num_particles=50, vectorize_particles=True, max_plate_nesting=1)
    pyro.set_rng_seed(0)
    closed = MeanFieldGuide(m, init_rho=-1.0, kl="closed-form")
    monte_carlo = MeanFieldGuide(
        m, init_loc={name: loc for name, (loc, _) in closed.site_loc_scale().items()}, init_rho=-1.0, kl="monte-carlo"
    )
    differences = []
    for seed in range(40):
        losses = []
        for guide in (closed, monte_carlo):
            pyro.set_rng_seed(seed)
            losses.append(elbo.loss(m, guide, x, y))
        differences.append(losses[1] - losses[0])
    differences = torch.tensor(differences)
    standard_error = differences.std() / len(differences) ** 0.5
    assert abs(differences.mean()) < 4 * standard_error
    kl = sum(gaussian_kl(loc, scale, 0.7).sum() for loc, scale in closed.site_loc_scale().values())
    assert standard_error < 0.05 * kl


def test_init_options(data):
    m = small_model()
    small = MeanFieldGuide(m, init_loc="small")
    locs = torch.cat([small.site_loc_scale()[site.name][0].flatten() for site in m.sites])
    assert locs.abs().max() < 0.5
    given = {"layers.0.weight": torch.full((4, 2), 0.25), "sigma": torch.tensor(2.0)}
    guide = MeanFieldGuide(m, init_loc=given, init_rho=0.0)
    loc_scale = guide.site_loc_scale()
    assert torch.equal(loc_scale["layers.0.weight"][0], given["layers.0.weight"])
    torch.testing.assert_close(loc_scale["sigma"][0], torch.tensor(2.0).log())  # unconstrained space
    torch.testing.assert_close(loc_scale["layers.1.bias"][1], torch.full((1,), 0.6931472))  # softplus(0)


@pytest.mark.long
def test_init_loc_map_weights_start_the_guide_at_the_map_before_any_step(data):
    """Given map_weights of the data (what fit passes for init_loc="map"), mu starts there, sigma at the ML noise."""
    x, y = data
    m = small_model(GaussianPrior(0.7))
    pyro.set_rng_seed(3)
    expected = map_weights(m, x, y)
    guide = MeanFieldGuide(m, init_loc=expected, init_rho=-2.0)
    loc_scale = guide.site_loc_scale()
    for site in m.sites:
        assert torch.equal(loc_scale[site.name][0], expected[site.name])
    torch.testing.assert_close(loc_scale["sigma"][0], expected["sigma"].log())  # unconstrained space
    torch.testing.assert_close(loc_scale["sigma"][1], torch.nn.functional.softplus(torch.tensor(-2.0)))
    before = loc_scale["layers.0.weight"][0].clone()
    guide(x, y)  # a call changes no parameter
    assert torch.equal(guide.site_loc_scale()["layers.0.weight"][0], before)


def test_init_loc_map_is_resolved_by_fit_not_by_the_guide():
    """A guide built directly has no data to fit the MAP on: the error says how to get it."""
    with pytest.raises(ValueError, match=r"init_loc='map' needs the training data.*fit with guide_options=\{'init_loc': "
                                         r"'map'\} \(or --guide-option init_loc=map\), or pass init_loc=map_weights"):
        MeanFieldGuide(small_model(), init_loc="map")


@pytest.mark.long
def test_cli_starts_at_the_map(tmp_path):
    out = tmp_path / "map"
    main(["fit", "--dataset", "toy1d", "--guide", "meanfield", "--guide-option", "init_loc=map", "--hidden", "4",
          "--steps", "5", "--num-samples", "5", "--jit", "--out", str(out), "--quiet"])
    assert json.loads((out / "metrics.json").read_text())["guide"] == "meanfield"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"init_loc": "zeros"}, "init_loc must be one of \\['prior', 'small', 'map'\\]"),
        ({"init_loc": {"layers.9.weight": torch.zeros(1)}}, "unknown sites \\['layers.9.weight'\\]"),
        ({"init_loc": {"layers.0.bias": torch.zeros(3)}}, "has shape \\(3,\\), the site has shape \\(4,\\)"),
        ({"init_rho": float("nan")}, "init_rho must be a finite number"),
        ({"kl": "exact"}, "unknown kl estimator 'exact'"),
        ({"kl": "closed-form"}, "closed-form KL needs a Gaussian prior"),
        ({"local_reparameterisation": True}, "local reparameterisation needs the closed-form KL"),
        ({"local_reparameterisation": "yes"}, "must be True, False or 'auto'"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        MeanFieldGuide(small_model(), **options)


def test_local_reparameterisation_refuses_a_monte_carlo_kl():
    with pytest.raises(ValueError, match="local reparameterisation needs the closed-form KL"):
        MeanFieldGuide(small_model(GaussianPrior()), kl="monte-carlo", local_reparameterisation=True)


def elbo_gradients(local_reparameterisation: bool, x, y, seeds: int) -> torch.Tensor:
    """Gradients of one-draw ELBO estimates on one fixed batch, one row per seed, same guide parameters."""
    m = BayesianMLP(1, 1, hidden=(20,), prior=GaussianPrior(1.0), likelihood=GaussianLikelihood(0.1))
    pyro.set_rng_seed(0)
    guide = MeanFieldGuide(m, init_rho=-2.0, local_reparameterisation=local_reparameterisation)
    model, scored_guide = guide.elbo_pair()
    elbo = Trace_ELBO(max_plate_nesting=1)
    rows = []
    for seed in range(seeds):
        pyro.set_rng_seed(1000 + seed)
        loss = elbo.differentiable_loss(model, scored_guide, x, y)
        rows.append(torch.autograd.grad(loss, list(guide.parameters()))[0].flatten())
    return torch.stack(rows)


def bootstrap_total_variance(rows: torch.Tensor, resamples: int, seed: int) -> torch.Tensor:
    r"""The total variance :math:`\sum_j \widehat{\operatorname{Var}}(g_j)` of ``rows`` (``(n, p)``, one draw a
    row) in each of ``resamples`` bootstrap resamples of the rows, shaped ``(resamples,)``."""
    n = rows.shape[0]
    picks = torch.randint(n, (resamples, n), generator=torch.Generator().manual_seed(seed))
    counts = torch.zeros(resamples, n, dtype=rows.dtype).scatter_add_(1, picks, torch.ones(resamples, n, dtype=rows.dtype))
    sums, squares = counts @ rows, counts @ rows**2
    return ((squares - sums**2 / n) / (n - 1)).sum(-1)


@pytest.mark.long
def test_local_reparameterisation_lowers_the_gradient_variance_and_keeps_its_mean():
    data = load_toy1d(n_train=100)
    seeds = 100
    weights = elbo_gradients(False, data.x_train, data.y_train, seeds)
    local = elbo_gradients(True, data.x_train, data.y_train, seeds)
    # total variance over all parameters: the ratio weights / local exceeds 1 at the 0.1% level, by its lower
    # 0.001 quantile over 4000 bootstrap resamples of the seeds (each estimator's rows resampled on their own)
    ratios = bootstrap_total_variance(weights, 4000, seed=0) / bootstrap_total_variance(local, 4000, seed=1)
    assert torch.quantile(ratios, 0.001) > 1
    # both estimate the same expected gradient: every coordinate agrees within 5 standard errors
    standard_error = (weights.var(0) / seeds + local.var(0) / seeds).sqrt()
    assert ((weights.mean(0) - local.mean(0)).abs() < 5 * standard_error).all()


def test_a_prior_swap_needs_a_new_guide(data):
    x, y = data
    m = small_model(GaussianPrior())
    guide = MeanFieldGuide(m)
    m.prior = "laplace"
    with pytest.raises(ValueError, match="prior changed after MeanFieldGuide was built; build a new guide"):
        guide(x, y)


@pytest.mark.long
def test_guides_of_two_fits_keep_their_own_parameters_and_same_seed_gives_same_numbers(data):
    a = fit(small_model(), data, guide="meanfield", steps=15, seed=1, progress=False, num_samples=5)
    assert not pyro.get_param_store().keys()  # the fit ran in its own scope
    # from here on both guides are used outside their fits, in the one global param store
    a_state = {k: v[0].clone() for k, v in a.extras["guide"].site_loc_scale().items()}
    b = fit(small_model(), data, guide="meanfield", steps=15, seed=2, progress=False, num_samples=5)
    x, y = data
    a.extras["guide"](x, y)
    b.extras["guide"](x, y)
    a_after = {k: v[0] for k, v in a.extras["guide"].site_loc_scale().items()}
    b_after = {k: v[0] for k, v in b.extras["guide"].site_loc_scale().items()}
    assert all(torch.equal(a_state[k], a_after[k]) for k in a_state)
    assert not torch.equal(a_after["layers.0.weight"], b_after["layers.0.weight"])
    again = fit(small_model(), data, guide="meanfield", steps=15, seed=1, progress=False, num_samples=5)
    assert again.record.elbo == a.record.elbo
    assert all(torch.equal(again.samples[k], a.samples[k]) for k in a.samples)


@pytest.mark.long
@pytest.mark.parametrize(
    "options", [{"kl": "closed-form", "local_reparameterisation": False}, {"kl": "monte-carlo"},
                {"local_reparameterisation": True}], ids=str
)
def test_reaches_the_mean_field_optimum_of_the_conjugate_posterior(conjugate, options):
    """Means equal the exact posterior mean m, variances the mean-field optimum 1/Lambda_kk: SGD steps from the
    fit's end, with an exact stationary mean, average to them within 4 batch-means standard errors, and the fit
    ended within their stationary spread (:func:`tests.support.conjugate.check_meanfield_optimum`)."""
    posterior = fit(
        conjugate.model, (conjugate.x, conjugate.y), guide="meanfield", guide_options={"init_rho": -3.0, **options},
        steps=1000, lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8, jit=True, seed=1,
        progress=False, num_samples=10,
    )
    fitted, chain = meanfield_chain(conjugate, posterior)
    check_meanfield_optimum(conjugate, chain, fitted)


@pytest.mark.long
@pytest.mark.parametrize("prior", ["gaussian", "laplace", "scale-mixture"])
def test_cli_fits_with_each_prior(tmp_path, prior):
    out = tmp_path / prior
    main(["fit", "--dataset", "toy1d", "--guide", "meanfield", "--prior", prior, "--hidden", "8", "--steps", "20",
          "--num-samples", "20", "--jit", "--out", str(out), "--quiet"])
    assert json.loads((out / "metrics.json").read_text())["guide"] == "meanfield"


def test_cli_refuses_the_closed_form_kl_with_a_laplace_prior(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--guide", "meanfield", "--prior", "laplace", "--guide-option", "kl=closed-form",
              "--out", str(tmp_path / "x"), "--quiet"])
    assert exit_info.value.code == 2
    assert "closed-form KL needs a Gaussian prior" in capsys.readouterr().err


def test_local_reparameterisation_keeps_the_expected_elbo_with_a_learned_noise_and_particles(data):
    """The locally reparameterised ELBO estimate (vectorised particles, a learned noise ``sigma``) averages to the
    weight-sampling estimate of the same guide: the means of 30 seeds agree within 4 standard errors."""
    x, y = data
    m = small_model(GaussianPrior(0.7))
    pyro.set_rng_seed(0)
    guide = MeanFieldGuide(m, init_rho=-1.0, local_reparameterisation=True)
    elbo = Trace_ELBO(num_particles=20, vectorize_particles=True, max_plate_nesting=1)
    estimates = {}
    for name, pair in (("weights", (m, guide)), ("local", guide.elbo_pair())):
        values = []
        for seed in range(30):
            pyro.set_rng_seed(seed)
            values.append(elbo.loss(*pair, x, y))
        estimates[name] = torch.tensor(values)
    standard_error = ((estimates["weights"].var() + estimates["local"].var()) / 30).sqrt()
    assert abs(estimates["weights"].mean() - estimates["local"].mean()) < 4 * standard_error


def test_local_reparameterisation_is_on_by_default_wherever_the_priors_allow_it():
    gaussian = small_model(prior=GaussianPrior(1.0))
    assert MeanFieldGuide(gaussian).local_reparameterisation is True
    assert MeanFieldGuide(gaussian, kl="monte-carlo").local_reparameterisation is False
    assert MeanFieldGuide(small_model()).local_reparameterisation is False  # Laplace and scale-mixture sites
    assert MeanFieldGuide(gaussian, local_reparameterisation=False).local_reparameterisation is False


@pytest.mark.parametrize("noise_prior_scale", [0.1, 1.0])
def test_a_learned_noise_starts_at_its_prior_median_and_the_weights_at_prior_draws(noise_prior_scale):
    """A HalfNormal(s) draw of the noise can be arbitrarily small; the start is its median s * sqrt(2) * erfinv(1/2)."""
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None,
                                                        "noise_prior_scale": noise_prior_scale})
    starts = []
    for seed in (0, 1):
        pyro.set_rng_seed(seed)
        starts.append(MeanFieldGuide(model).prior_start())
    median = noise_prior_scale * 2**0.5 * torch.erfinv(torch.tensor(0.5))
    for start in starts:
        torch.testing.assert_close(start["sigma"], median)
    assert not torch.equal(starts[0]["layers.0.weight"], starts[1]["layers.0.weight"])


def test_a_prior_without_an_inverse_cdf_starts_at_its_mean():
    prior = torch.distributions.Gamma(torch.tensor(3.0), torch.tensor(2.0))
    torch.testing.assert_close(prior_median(prior), torch.tensor(1.5))
