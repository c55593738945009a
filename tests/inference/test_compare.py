from __future__ import annotations

import math

import pytest
import torch

from bnn_data import load_dataset, load_toy1d
from inference import Posterior, fit
from inference.compare import compare, label_fits, rank
from models import BayesianMLP

TINY = {
    "svi": dict(steps=30, num_draws=60),
    "nuts": dict(num_warmup=30, num_samples=30, num_chains=2),
    "laplace": dict(num_draws=60),
}
ALWAYS = ["method", "guide", "prior", "predictive", "fit_seconds", "test_ll", "elbo", "log_marginal_likelihood", "loo_elpd",
          "loo_se", "loo_bad_k", "waic_elpd", "waic_se", "waic_warning", "r_hat_max", "ess_bulk_min", "ess_tail_min",
          "r_hat_predictive", "divergences", "chains_agree"]


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=20)


@pytest.fixture(scope="module")
def fits(toy):
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    return [fit(model, toy, method, seed=0, progress=False, **TINY[method]) for method in TINY]


def test_regression_table_has_every_column_and_loo_waic_for_every_method(fits, toy):
    table = compare(fits, toy)
    assert list(table.index) == ["svi (autonormal)", "nuts", "laplace"]
    assert set(ALWAYS + ["test_rmse", "coverage_50", "coverage_90"]) <= set(table.columns)
    for column in ("loo_elpd", "loo_se", "waic_elpd", "test_rmse", "test_ll"):
        assert table[column].map(math.isfinite).all(), column
    assert math.isfinite(table.loc["nuts", "r_hat_predictive"]) and table.loc["nuts", "divergences"] >= 0
    assert math.isnan(table.loc["svi (autonormal)", "r_hat_max"])
    assert math.isfinite(table.loc["svi (autonormal)", "elbo"])
    assert math.isfinite(table.loc["laplace", "log_marginal_likelihood"])
    assert list(table["predictive"]) == ["mc", "mc", "linearized"]
    ranking = rank(fits)
    assert set(ranking.index) == set(table.index) and ranking["weight"].sum() == pytest.approx(1.0)


def test_classification_table_has_accuracy_auc_and_ece():
    data = load_dataset("breast_cancer")
    model = BayesianMLP(data.in_features, 1, hidden=(4,), likelihood="bernoulli")
    table = compare([fit(model, data, steps=50, num_draws=50, progress=False)], data)
    assert {"test_accuracy", "roc_auc", "ece", "test_ll"} <= set(table.columns)
    assert "test_rmse" not in table.columns and "coverage_90" not in table.columns


def test_chains_that_disagree_are_flagged(toy):
    """Two chains around different functions (one shifted by 3 posterior sds of the output bias)."""
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    one = fit(model, toy, steps=60, num_draws=200, progress=False)
    draws = one.samples
    shifted = {k: v.clone() for k, v in draws.items()}
    shifted["layers.1.bias"] += 3 * draws["layers.1.bias"].std() + 1.0
    two_chains = {k: torch.cat([draws[k], shifted[k]]) for k in draws}
    agreeing = {k: torch.cat([draws[k][:, :100], draws[k][:, 100:]]) for k in draws}
    table = compare({"disagree": Posterior(model, two_chains, one.x, one.y, {"method": "nuts", "seed": 0}),
                     "agree": Posterior(model, agreeing, one.x, one.y, {"method": "nuts", "seed": 0})}, toy)
    assert not table.loc["disagree", "chains_agree"] and table.loc["disagree", "r_hat_predictive"] > 1.5
    assert table.loc["agree", "chains_agree"]


def test_labels_are_unique():
    class Fake:
        def __init__(self, method, guide=None):
            self.method, self.info = method, {"guide": guide}

    labels = label_fits([Fake("svi", "autonormal"), Fake("svi", "autonormal"), Fake("nuts"), Fake("svi", "meanfield")])
    assert list(labels) == ["svi (autonormal)", "svi (autonormal) #2", "nuts", "svi (meanfield)"]
