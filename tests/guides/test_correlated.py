"""The full and low-rank Gaussian guides: the exact posterior of the conjugate model (which mean field cannot hold),
through fit, compare and save/load; refused where they cannot run."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.svi.minibatches import StepPlan
from bnn.inference.svi.options import SVIOptions
from bnn.models import BayesianMLP

from bnn.experiments.comparison.run import run_comparison
from tests.conftest import default_dtype
from tests.support.conjugate import conjugate_problem

DRAWS = 2000


@pytest.fixture(scope="module")
def problem():
    with default_dtype(torch.float64):
        yield conjugate_problem()


@pytest.mark.long
@pytest.mark.parametrize("guide, guide_options", [
    ("full", {}), *(pytest.param(guide, options, marks=pytest.mark.slow) for guide, options in
                    [("lowrank", {"rank": 3}), ("flow", {})])], ids=["full", "lowrank", "flow"])  # 7-12 s each
def test_the_guide_holds_the_exact_posterior_of_the_conjugate_model(problem, guide, guide_options):
    # the exact posterior is a correlated Gaussian, in the family of each guide (rank 3 = D; two affine flows): the
    # draws' mean, variances and covariances lie within 4 Monte Carlo standard errors of m and S (the optimiser's own
    # error, after a cosine rate down to 1%, is part of what the tolerance must cover)
    with default_dtype(torch.float64):
        posterior = fit(problem.model, (problem.x, problem.y), "svi", guide=guide, guide_options=guide_options,
                        steps=2000, num_particles=8, num_samples=DRAWS, seed=1, progress=False)
    assert posterior.record.converged
    draws = problem.flatten(posterior.draws())
    cov, exact = torch.cov(draws.T), problem.cov
    sd = exact.diagonal().sqrt()
    assert ((draws.mean(0) - problem.mean).abs() < 4 * sd / math.sqrt(DRAWS)).all()
    # the sample covariance's standard error: sqrt((S_ii S_jj + S_ij^2) / N)
    cov_se = ((exact.diagonal()[:, None] * exact.diagonal()[None, :] + exact**2) / DRAWS).sqrt()
    assert ((cov - exact).abs() < 4 * cov_se).all()
    # a mean-field guide's covariances are 0: the posterior's strongest one is held, more than 4 errors from 0
    i, j = divmod(int((exact - torch.diag(exact.diagonal())).abs().argmax()), len(exact))
    assert cov[i, j].abs() > 4 * cov_se[i, j]


def test_through_compare_and_save_and_load(tmp_path):
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    table = run_comparison(data, "svi:full,svi:lowrank,svi:flow", model=model, out=tmp_path / "report",
                           options={"steps": 50, "num_samples": 20}, progress=False)
    assert list(table.index) == ["svi (full)", "svi (lowrank)", "svi (flow)"] and table["test_ll"].notna().all()
    posterior = fit(model, data, "svi", guide="lowrank", guide_options={"rank": 2}, steps=50, num_samples=20,
                    progress=False)
    posterior.save(tmp_path / "fit")
    loaded = Posterior.load(tmp_path / "fit")
    assert loaded.record.guide == "lowrank"
    torch.testing.assert_close(loaded.samples, posterior.samples)


def test_they_run_without_jit_and_a_full_covariance_too_big_for_memory_is_refused_before_any_work():
    data = load_toy1d(n_train=30, n_test=10)
    for guide in ("full", "lowrank", "flow"):
        assert not StepPlan.of(None, 30, SVIOptions.parse("svi", {"guide": guide, "steps": 10_000})).jit
    with pytest.raises(ValueError, match=r"guide 'full' runs without JIT .* leave jit unset, or jit=False"):
        fit(BayesianMLP(1, 1, hidden=(3,)), data, "svi", guide="full", jit=True, progress=False)
    wide = BayesianMLP(1, 1, hidden=(200_000,))  # 600,001 latents: a Cholesky factor of 3.6e11 entries
    with pytest.raises(ValueError, match=r"the full covariance's Cholesky factor, its gradients and Adam's moments"):
        fit(wide, data, "svi", guide="full", steps=1, progress=False)
