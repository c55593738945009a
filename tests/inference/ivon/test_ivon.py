r"""IVON against the closed-form mean-field optimum of Bayesian linear regression, its refusals, and what it records.

For the conjugate model (tests/support/conjugate.py) the per-example loss is quadratic,
:math:`\bar\ell(\theta) = \tfrac12 (\theta - \theta^*)^\top A (\theta - \theta^*) + c` with :math:`A = \Phi^\top\Phi /
(\sigma^2 N)`. IVON's Price estimate of the Hessian at a draw :math:`\theta = m + \sigma_q \odot \varepsilon` is
:math:`\hat h_k = \varepsilon_k \hat g_k / \sigma_{q,k}`, whose mean is :math:`A_{kk}`, so its fixed point gives the
mean-field optimum's variances :math:`1/(N (A_{kk} + \delta_k)) = 1/\Lambda_{kk}`, and its mean step's fixed point the
posterior mean :math:`m`. The tolerances are the Monte Carlo errors of the end of the run: the Hessian's running
estimate with :math:`\beta_2` averages :math:`(1 - \beta_2)/(1 + \beta_2)` of a draw's variance
:math:`\mathrm{Var}\,\hat h_k = 2A_{kk}^2 + \sum_{j \ne k} A_{kj}^2 \sigma_{q,j}^2 / \sigma_{q,k}^2
+ (\delta_k m_k / \sigma_{q,k})^2`; the mean, stepped at the rate :math:`\alpha/(h + \delta)` with gradient noise of
variance :math:`v_k = \sum_j A_{kj}^2 \sigma_{q,j}^2`, keeps at most the stationary variance
:math:`\alpha' v_k / (2 (A_{kk} + \delta_k))` of the rate :math:`\alpha'` of the run's last tenth.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.models import BayesianMLP

from tests.conftest import default_dtype
from tests.support.conjugate import NOISE, PRIOR_SCALE, conjugate_problem

FULL_BATCH = {"batch_size": None, "epochs": 4000, "beta2": 0.99, "num_samples": 10, "progress": False, "seed": 0}


@pytest.fixture(scope="module")
def exact():  # 4,000 full-batch steps: seconds
    with default_dtype(torch.float64):
        conjugate = conjugate_problem()
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "ivon", **FULL_BATCH)
    return conjugate, posterior


@pytest.mark.long
def test_ivon_reaches_the_mean_field_optimum_of_the_conjugate_posterior(exact):
    conjugate, posterior = exact
    rows = conjugate.x.shape[0]
    phi = torch.cat([conjugate.x, torch.ones(rows, 1, dtype=conjugate.x.dtype)], dim=1)
    a = phi.T @ phi / (NOISE**2 * rows)
    delta = 1.0 / (rows * PRIOR_SCALE**2)
    mean = conjugate.flatten(posterior.extras["mean"])
    sd_q = conjugate.flatten(posterior.extras["standard_deviation"])
    variance = sd_q**2
    # the Hessian's running estimate: its Monte Carlo standard error, carried to the variance 1 / (N (h + delta))
    off_diagonal = (a**2 * sd_q[None, :] ** 2 / sd_q[:, None] ** 2).sum(1) - a.diagonal() ** 2
    price_variance = 2 * a.diagonal() ** 2 + off_diagonal + (delta * conjugate.mean / sd_q) ** 2
    hess_se = (price_variance * (1 - FULL_BATCH["beta2"]) / (1 + FULL_BATCH["beta2"])).sqrt()
    relative = hess_se / (a.diagonal() + delta)
    assert ((variance / conjugate.meanfield_var - 1).abs() <= 4 * relative).all(), (variance, conjugate.meanfield_var)
    # the mean: the stationary spread at the rate of the run's last tenth
    steps = FULL_BATCH["epochs"]
    rate = 0.3 * (1.0 + delta) * cosine_factors(steps)[int(0.9 * steps)] / (a.diagonal() + delta)
    gradient_noise = (a**2 * variance[None, :]).sum(1)
    spread = (rate * gradient_noise / (2 * (a.diagonal() + delta))).sqrt()
    assert ((mean - conjugate.mean).abs() <= 4 * spread).all(), (mean, conjugate.mean, spread)
    assert posterior.record.converged


@pytest.mark.long
def test_the_draws_are_the_fitted_gaussian_and_the_fit_saves_and_loads(exact, tmp_path):
    conjugate, posterior = exact
    assert posterior.samples["layers.0.weight"].shape == (1, 10, 1, 2) and posterior.record.guide == "ivon"
    posterior.save(tmp_path / "run")
    with default_dtype(torch.float64):
        loaded = Posterior.load(tmp_path / "run")
        assert loaded.method == "ivon" and loaded.record.steps_done == FULL_BATCH["epochs"]
        torch.testing.assert_close(loaded.predict(conjugate.x, seed=0).mean, posterior.predict(conjugate.x, seed=0).mean)


def test_the_same_seed_gives_the_same_draws():
    data = (torch.linspace(-1, 1, 30).unsqueeze(-1), torch.sin(3 * torch.linspace(-1, 1, 30)))
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    first, second = (fit(model, data, "ivon", epochs=20, batch_size=8, num_samples=5, progress=False, seed=3)
                     for _ in range(2))
    assert all(torch.equal(first.samples[name], second.samples[name]) for name in first.samples)
    assert first.record.noise is not None and torch.equal(first.samples["sigma"], second.samples["sigma"])


@pytest.mark.parametrize("prior", ["laplace", "scale-mixture", {"name": "gaussian", "scale": 2.0}])
def test_a_prior_that_is_not_one_zero_mean_gaussian_per_site_is_refused_before_any_work(prior, monkeypatch):
    model = BayesianMLP(1, 1, hidden=(3,), prior=prior)
    data = (torch.randn(10, 1), torch.randn(10))
    if prior == {"name": "gaussian", "scale": 2.0}:  # one scale per site: fitted, its weight decay 1 / (N s^2)
        posterior = fit(model, data, "ivon", epochs=2, num_samples=3, progress=False)
        assert posterior.num_draws == 3
        return
    monkeypatch.setattr("bnn.inference.ivon.fit.IVON", lambda *args, **kwargs: pytest.fail("work started"))
    with pytest.raises(ValueError, match=r"method 'ivon' needs a zero-mean Gaussian prior with one scale per site .* "
                                         r"use prior='gaussian'"):
        fit(model, data, "ivon")


def test_a_run_stopped_while_its_objective_still_rises_says_so():
    x = torch.linspace(-2, 2, 200).unsqueeze(-1)
    model = BayesianMLP(1, 1, hidden=(20,), likelihood={"name": "gaussian", "scale": 0.1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior = fit(model, (x, torch.sin(3 * x[:, 0])), "ivon", epochs=200, batch_size=None, lr=0.01,
                        num_samples=3, progress=False)  # full-batch steps at a small rate: far from done
    assert posterior.record.converged is False
    assert any("IVON's training objective had not flattened when IVON stopped" in str(w.message) for w in caught)
    assert "give it more epochs (epochs=, --epochs)" in posterior.record.problems()[0]


def test_the_default_training_is_the_default_epochs():
    from bnn.inference.ivon import IVONOptions

    options = IVONOptions.parse("ivon", {})
    assert options.training_epochs(100) == 9000 and options.training_steps(100) == 9000  # one batch an epoch
    assert options.training_epochs(4000) == math.ceil(9000 / 32) == 282  # MNIST-1D: the steps bind
    assert options.training_epochs(40_000) == 50 and options.training_steps(40_000) == 50 * math.ceil(40_000 / 128)
    assert IVONOptions.parse("ivon", {"epochs": 7}).training_steps(40_000) == 7 * math.ceil(40_000 / 128)
