r"""SVGD against the exact posterior of Bayesian linear regression, the flat program it fits, its own check, and what
it records.

**The tolerances.** The conjugate model (tests/support/conjugate.py) has :math:`D = 3` coordinates, low enough that RBF
SVGD's finite-particle variance deficit stays small (it grows with :math:`D/n`: Ba et al. 2021). The particles are a
deterministic, nearly quasi-Monte Carlo set, so their mean is within a few hundredths of :math:`\sqrt{S_{kk}/n}` of
:math:`m` (measured); the bound :math:`3\sqrt{S_{kk}/n}`, what :math:`n` independent draws would miss by once in 370,
is loose for them. Their variances fall short of :math:`S_{kk}` by a bias that shrinks as :math:`1/\sqrt n` at the
default bandwidth: measured ratios 0.58, 0.74, 0.86 at :math:`n` = 30, 100, 300 on this model, a deficit of
:math:`(2.3\text{--}2.6)/\sqrt n`; the test allows :math:`4/\sqrt n` below and :math:`3\sqrt{2/n}` above (the sampling
error of :math:`n` independent draws' variance). Correlations match within :math:`3(1 - \rho^2)/\sqrt n`, the
standard error of :math:`n` independent draws' correlation (the particles' were within 0.02 at :math:`n = 100`).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.svgd.flat_model import FLAT_SITE, FlatLatents
from bnn.models import BayesianMLP
from pyro import poutine
from torch.distributions import Normal
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import default_dtype
from tests.support.conjugate import NOISE, PRIOR_SCALE, conjugate_problem


def fit_conjugate(particles: int, steps: int):
    with default_dtype(torch.float64):
        problem = conjugate_problem()
        posterior = fit(problem.model, (problem.x, problem.y), "svgd", num_samples=particles, steps=steps, seed=0,
                        progress=False)
    return problem, posterior


def assert_near_the_exact_posterior(problem, posterior) -> torch.Tensor:
    """The tolerances of the module notes; returns the variance ratios."""
    draws = problem.flatten({name: value[0] for name, value in posterior.samples.items()})
    n = draws.shape[0]
    sd = problem.cov.diagonal().sqrt()
    assert ((draws.mean(0) - problem.mean).abs() <= 3 * sd / math.sqrt(n)).all(), (draws.mean(0), problem.mean)
    covariance = torch.cov(draws.T)
    ratio = covariance.diagonal() / problem.cov.diagonal()
    assert ((ratio >= 1 - 4 / math.sqrt(n)) & (ratio <= 1 + 3 * math.sqrt(2 / n))).all(), ratio
    exact_correlation = problem.cov / sd.outer(sd)
    correlation = covariance / covariance.diagonal().sqrt().outer(covariance.diagonal().sqrt())
    rows, columns = torch.triu_indices(3, 3, offset=1)
    error = (correlation - exact_correlation)[rows, columns].abs()
    assert (error <= 3 * (1 - exact_correlation[rows, columns] ** 2) / math.sqrt(n)).all(), correlation
    return ratio


@pytest.mark.long
def test_the_particles_hold_the_exact_posterior_of_the_conjugate_model():
    problem, posterior = fit_conjugate(particles=40, steps=300)
    assert_near_the_exact_posterior(problem, posterior)
    assert posterior.record.converged


@pytest.mark.slow
def test_the_variance_deficit_shrinks_as_the_particles_grow():  # about a minute
    deficits = [1 - assert_near_the_exact_posterior(*fit_conjugate(particles, steps=1000)) for particles in (30, 100, 300)]
    assert (deficits[0] > deficits[1]).all() and (deficits[1] > deficits[2]).all(), deficits


def test_the_flat_program_scores_the_models_log_joint_and_starts_from_its_prior():
    with default_dtype(torch.float64):
        problem = conjugate_problem()
        latents = FlatLatents.of(problem.model, problem.x, problem.y)
        flat = torch.randn(4, latents.dim, generator=torch.Generator().manual_seed(0))
        values, _ = latents.values(flat)
        assert set(values) == {"layers.0.weight", "layers.0.bias"}
        torch.testing.assert_close(problem.flatten(values), flat)  # site by site, each row-major
        f = problem.x @ flat[:, :2].T + flat[:, 2]
        by_hand = (Normal(0.0, PRIOR_SCALE).log_prob(flat).sum(-1)
                   + Normal(f, NOISE).log_prob(problem.y.unsqueeze(-1)).sum(0))
        program = latents.program()
        for particle, expected in zip(flat, by_hand):
            trace = poutine.trace(poutine.condition(program, data={FLAT_SITE: particle})).get_trace(problem.x, problem.y)
            torch.testing.assert_close(trace.log_prob_sum(), expected)
        torch.manual_seed(0)
        particles = latents.prior_particles(problem.x, problem.y, 2000).reshape(2000, latents.dim)
    assert particles.mean(0).abs().max() < 4 * PRIOR_SCALE / math.sqrt(2000)
    assert ((particles.std(0) / PRIOR_SCALE - 1).abs() < 4 / math.sqrt(2 * 2000)).all()


def test_a_learned_noise_is_a_positive_coordinate_with_its_jacobian():
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})
    x, y = torch.randn(10, 1), torch.randn(10)
    latents = FlatLatents.of(model, x, y)
    flat = torch.zeros(2, latents.dim)
    flat[:, -1] = torch.tensor([-1.0, 1.0])  # sigma, the last site, at exp(-1) and exp(1)
    values, log_jacobian = latents.values(flat)
    torch.testing.assert_close(values["sigma"], torch.tensor([-1.0, 1.0]).exp())
    torch.testing.assert_close(log_jacobian, torch.tensor([-1.0, 1.0]))  # log |d exp(u) / du| = u


SMALL = {"steps": 30, "num_samples": 6, "progress": False}


def toy_data():
    x = torch.linspace(-1, 1, 20).unsqueeze(-1)
    return x, torch.sin(3 * x[:, 0])


def quiet_fit(model, data, **options) -> Posterior:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(model, data, "svgd", **{**SMALL, **options})


def test_the_same_seed_gives_the_same_particles_and_the_fit_saves_and_loads(tmp_path):
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    first, second, other = (quiet_fit(model, toy_data(), seed=seed) for seed in (3, 3, 4))
    assert all(torch.equal(first.samples[name], second.samples[name]) for name in first.samples)
    assert not torch.equal(first.samples["sigma"], other.samples["sigma"])
    assert first.samples["layers.0.weight"].shape == (1, 6, 4, 1) and (first.samples["sigma"] > 0).all()
    first.save(tmp_path / "run")
    loaded = Posterior.load(tmp_path / "run")
    assert loaded.method == "svgd" and loaded.record.steps_done == 30 and loaded.record.dimension == first.record.dimension == 14
    torch.testing.assert_close(loaded.predict(toy_data()[0], seed=0).mean, first.predict(toy_data()[0], seed=0).mean)


def test_hierarchical_priors_are_fitted_through_their_log_scales_and_standardised_weights():
    model = BayesianMLP(2, 1, hidden=(3,), prior="horseshoe", likelihood={"name": "gaussian", "scale": 0.3})
    x = torch.randn(15, 2, generator=torch.Generator().manual_seed(0))
    posterior = quiet_fit(model, (x, x[:, 0]))
    assert posterior.record.options.kernel == "imq"  # the default for hierarchical priors (SVGDOptions.kernel)
    assert set(posterior.samples) == set(model.latent_shapes)
    scales = [name for name in model.scale_shapes]
    assert scales and all((posterior.samples[name] > 0).all() for name in scales)
    assert all(torch.isfinite(value).all() for value in posterior.samples.values())


def test_a_loader_and_a_single_particle_are_refused_before_any_work(monkeypatch):
    monkeypatch.setattr("bnn.inference.svgd.fit.SVGD", lambda *args, **kwargs: pytest.fail("work started"))
    model = BayesianMLP(1, 1, hidden=(3,))
    x, y = toy_data()
    with pytest.raises(ValueError, match="method 'svgd' computes on every training row"):
        fit(model, DataLoader(TensorDataset(x, y), batch_size=5), "svgd")
    with pytest.raises(ValueError, match="num_samples"):
        fit(model, (x, y), "svgd", num_samples=1)


def test_a_run_a_hundred_times_too_short_says_so():
    x = torch.linspace(-2, 2, 100).unsqueeze(-1)
    model = BayesianMLP(1, 1, hidden=(50,), likelihood={"name": "gaussian", "scale": None})
    with pytest.warns(ConvergenceWarning, match="the particles' mean log joint was still rising when SVGD stopped"):
        posterior = fit(model, (x, torch.sin(3 * x[:, 0])), "svgd", steps=30, progress=False)  # the default: 3,000
    assert posterior.record.converged is False
    assert "give it more steps (steps=, --steps)" in posterior.record.problems()[0]


@pytest.mark.slow
def test_a_fit_at_the_defaults_on_toy1d_passes_its_own_check():  # one to two minutes
    from bnn.datasets import load_toy1d

    data = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(50,), likelihood={"name": "gaussian", "scale": None})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        posterior = fit(model, data, "svgd", progress=False)
    assert posterior.record.converged and posterior.record.problems() == []


def test_the_cost_counts_full_batch_steps_and_says_when_the_full_batch_is_not_cheap():
    from bnn.inference.svgd.cost import count
    from bnn.inference.svgd.options import SVGDOptions

    model, options = BayesianMLP(1, 1, hidden=(50,)), SVGDOptions.parse("svgd", {"steps": 200, "num_samples": 10})
    small, large = count(options, 100, model), count(options, 10**7, model)
    assert small.gradients == large.gradients == 200 and "on all 100 rows" in small.how
    assert "takes no minibatches" not in small.how and "SVGD takes no minibatches" in large.how
