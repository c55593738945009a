from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import arviz as az
import numpy as np
import pandas as pd
import pytest
from bnn.datasets import DATASETS, load_dataset, load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.compare import compare, label_fits, rank
from bnn.inference.fit import METHODS
from bnn.models import BayesianMLP

from bnn.experiments.comparison.report import OTHER_CHAIN_ADVICE, convergence_warnings
from tests.datasets.test_datasets import LARGE
from tests.support.chains import chains_posterior

TINY = {
    "svi": dict(steps=30, num_samples=60),
    "nuts": dict(num_warmup=30, num_samples=30, num_chains=2, chain_method="sequential"),
    "laplace": dict(num_samples=60),
}
ALWAYS = ["method", "guide", "prior", "predictive", "fit_seconds", "test_ll", "elbo", "log_marginal_likelihood", "loo_elpd",
          "loo_se", "loo_bad_k", "waic_elpd", "waic_se", "waic_warning", "r_hat_max", "ess_bulk_min", "ess_tail_min",
          "r_hat_predictive", "divergences", "converged", "chains_agree"]


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=20)


@pytest.fixture(scope="module")
def fits(toy):
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    return [fit(model, toy, method, seed=0, progress=False, **TINY[method]) for method in TINY]


@pytest.mark.long
def test_regression_table_has_every_column_and_loo_waic_for_every_method(fits, toy):
    table = compare(fits, toy)
    assert list(table.index) == ["svi (meanfield)", "nuts", "laplace"]
    assert set(ALWAYS + ["test_rmse", "coverage_50", "coverage_90"]) <= set(table.columns)
    for column in ("loo_elpd", "loo_se", "waic_elpd", "test_rmse", "test_ll"):
        assert table[column].map(math.isfinite).all(), column
    assert math.isfinite(table.loc["nuts", "r_hat_predictive"]) and table.loc["nuts", "divergences"] >= 0
    nuts = fits[1].record.diagnostics  # NUTS's own numbers, unrounded, and its own verdict
    for column in ("r_hat_max", "ess_bulk_min", "ess_tail_min", "divergences", "converged", "r_hat_predictive"):
        assert table.loc["nuts", column] == getattr(nuts, column), column
    assert math.isnan(table.loc["svi (meanfield)", "r_hat_max"])
    assert math.isfinite(table.loc["svi (meanfield)", "elbo"])
    assert math.isfinite(table.loc["laplace", "log_marginal_likelihood"])
    assert list(table["predictive"]) == ["mc", "mc", "linearized"]
    ranking = rank(fits)
    assert set(ranking.index) == set(table.index) and ranking["weight"].sum() == pytest.approx(1.0)
    # the ranking from each fit's LOO, computed once, is ArviZ's own ranking of the fits' InferenceData
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's reliability notes, which the table reports
        direct = az.compare({label: p.to_inference_data() for label, p in label_fits(fits).items()})
    pd.testing.assert_frame_equal(ranking, direct)


def test_inference_data_is_built_once_and_each_caller_gets_its_own_copy(fits):
    posterior = fits[0]
    first = posterior.to_inference_data()
    first.log_likelihood["obs"][:] = 0.0  # a caller's change ...
    second = posterior.to_inference_data()
    assert not np.all(second.log_likelihood["obs"].values == 0.0)  # ... stays its own
    assert second.log_likelihood.equals(posterior.to_inference_data().log_likelihood)


@pytest.mark.long
def test_classification_table_has_accuracy_auc_and_ece():
    data = load_dataset("breast_cancer")
    model = BayesianMLP(data.in_features, 1, hidden=(4,), likelihood="bernoulli")
    table = compare([fit(model, data, steps=50, num_samples=50, progress=False)], data)
    assert {"test_accuracy", "roc_auc", "ece", "test_ll"} <= set(table.columns)
    assert "test_rmse" not in table.columns and "coverage_90" not in table.columns


CHAIN_DRAWS = 5000
"""Draws per fake chain. For independent draws, split R-hat over m = 4 half-chains of n = 2500 is about
1 + (F - 1) / (2n) with F ~ chi2(m - 1) / (m - 1) (sd sqrt(2/3)): R-hat - 1 has sd ~ 1.6e-4, so agreeing chains
stay below 1.01 by ~60 sd (with 2 x 100 draws the sd is ~0.008 and they cross 1.01 often)."""


@pytest.mark.long
def test_chains_that_disagree_are_flagged(toy):
    """Two chains around different functions (one shifted by 3 posterior sds of the output bias + 1), against two
    chains of independent draws from one distribution."""
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    one = fit(model, toy, steps=60, num_samples=2 * CHAIN_DRAWS, progress=False)
    halves = {k: v.reshape(2, CHAIN_DRAWS, *v.shape[2:]) for k, v in one.samples.items()}
    agreeing = halves
    disagreeing = {k: v.clone() for k, v in halves.items()}
    bias = disagreeing["layers.1.bias"]
    bias[1] += 3 * bias[0].std() + 1.0
    table = compare({"disagree": chains_posterior(model, disagreeing, one.x, one.y),
                     "agree": chains_posterior(model, agreeing, one.x, one.y)}, toy)
    disagree, agree = table.loc["disagree"], table.loc["agree"]
    assert not disagree["chains_agree"] and disagree["r_hat_predictive"] > 1.5
    assert not disagree["converged"] and disagree["r_hat_max"] > 1.5
    assert agree["chains_agree"] and agree["converged"] and agree["r_hat_max"] <= 1.01
    [warning] = convergence_warnings(table)
    assert warning.startswith(f"**Warning: disagree did not converge**: max R-hat {disagree['r_hat_max']:.4g} (threshold 1.01), "
                              f"min bulk ESS {disagree['ess_bulk_min']:.4g}, min tail ESS {disagree['ess_tail_min']:.4g}, "
                              "0 divergences. ")
    predictive = disagree["r_hat_predictive"]
    assert f"predictive R-hat of f(x) at the training inputs: {predictive:.4g} (the chains disagree on the predictions too)" \
        in warning
    assert warning.endswith(f"(100 per chain needed). Try: {METHODS.get('nuts').advice}")
    [registered_elsewhere] = convergence_warnings(table.assign(method="my-chains"))  # a Markov-chain method of a user's
    assert registered_elsewhere.endswith(f"Try: {OTHER_CHAIN_ADVICE}")


def test_one_chain_nuts_gets_ess_but_no_r_hat(toy):
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    one = fit(model, toy, steps=30, num_samples=100, progress=False)
    row = compare({"nuts": chains_posterior(model, one.samples, one.x, one.y)}, toy).loc["nuts"]
    assert row["ess_bulk_min"] > 0 and row["ess_tail_min"] > 0  # finite: ESS needs one chain only
    assert math.isnan(row["r_hat_max"]) and math.isnan(row["r_hat_predictive"]) and row["chains_agree"] is None
    assert row["divergences"] == 0
    assert not row["converged"]  # one chain cannot show that it found the whole posterior


@pytest.mark.long
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in LARGE | {"digits"} else name
                                  for name in DATASETS.names()])  # digits: make test has mnist1d's ten classes
def test_every_built_in_data_set_gets_finite_loo_and_waic(name):
    data = load_dataset(name)
    likelihood = {"name": "gaussian", "scale": 0.5} if data.task == "regression" else data.likelihood_name  # a quick MAP
    model = BayesianMLP(data.in_features, data.out_features, hidden=(2,), likelihood=likelihood)
    fits = [fit(model, data, "svi", steps=20, num_samples=30, progress=False),
            fit(model, data, "laplace", map_steps=300, map_tolerance=5.0, num_samples=30, tune_prior_precision=False,
                progress=False)]
    table = compare(fits, data)
    assert list(table.index) == ["svi (meanfield)", "laplace"]
    for column in ("loo_elpd", "loo_se", "waic_elpd", "waic_se", "test_ll"):
        assert table[column].map(math.isfinite).all(), column
    score = "test_rmse" if data.task == "regression" else "test_accuracy"
    assert table[score].map(math.isfinite).all()


def test_labels_are_unique():
    class Fake:
        def __init__(self, label):
            self.record = SimpleNamespace(label=label)

    labels = label_fits([Fake("svi (autonormal)"), Fake("svi (autonormal)"), Fake("nuts"), Fake("svi (meanfield)")])
    assert list(labels) == ["svi (autonormal)", "svi (autonormal) #2", "nuts", "svi (meanfield)"]
