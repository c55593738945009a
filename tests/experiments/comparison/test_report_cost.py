from __future__ import annotations

import math

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference.evaluation.compare import compare
from bnn.models import BayesianMLP

from bnn.experiments.comparison import report_cost
from bnn.experiments.comparison.report_cost import (
    FEW_DRAWS,
    FIGURES_FIXED,
    FIGURES_PER_FIT,
    MORE_DRAWS,
    PROBE_CELLS,
    PROBE_REPEATS,
    ReportEstimate,
    estimate_report,
    probe_posterior,
)


def test_the_probe_holds_draws_of_the_prior_and_leaves_the_callers_random_state():
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(20,), likelihood={"name": "gaussian", "scale": None})
    state = torch.random.get_rng_state()
    probe = probe_posterior(model, data, 2000)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert (probe.num_chains, probe.num_draws) == (1, 2000)
    for site in model.sites:  # each weight's draws have the prior's sd: 2,000 x its entries draws, MC error < 4%
        draws = probe.samples[site.name]
        prior_sd = model.prior[site.name].distribution(site).stddev
        assert torch.allclose(draws.std(dim=(0, 1)).mean() / prior_sd.mean(), torch.tensor(1.0), atol=0.08), site.name
    assert torch.equal(probe_posterior(model, data, 2000).samples["layers.0.weight"], probe.samples["layers.0.weight"])


@pytest.mark.parametrize("prior", ["gaussian", "ard", "horseshoe"])
def test_the_report_evaluates_a_probe_as_it_evaluates_a_fit(prior):
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(5,), prior=prior, likelihood={"name": "gaussian", "scale": None})
    probe = probe_posterior(model, data, FEW_DRAWS)
    table = compare({"probe": probe}, data)
    assert math.isfinite(table.loc["probe", "test_rmse"]) and math.isfinite(table.loc["probe", "loo_elpd"])


def test_the_estimate_adds_each_fits_evaluation_and_the_figures():
    report = ReportEstimate(draws=(1000, 1400, 1), rows=200, first_draws_seconds=0.4, draw_seconds=2e-4,
                            figure_seconds=0.125)
    evaluation = (0.4 + 980 * 2e-4) + (0.4 + 1380 * 2e-4) + max(0.4 - 19 * 2e-4, 0)
    assert report.figure_units == FIGURES_FIXED + 3 * FIGURES_PER_FIT
    assert report.seconds == pytest.approx(evaluation + report.figure_units * 0.125, rel=1e-12)
    assert report.for_draws([1000]).seconds == pytest.approx(0.4 + 980 * 2e-4 + (FIGURES_FIXED + FIGURES_PER_FIT) * 0.125)
    assert report.describe().startswith("report: about 9 s: 3 fits of 1,000, 1,400, 1 draws on 200 rows")


def test_the_units_are_measured_on_the_model_and_data_at_hand():
    data = load_toy1d(n_train=60, n_test=20)
    model = BayesianMLP(1, 1, hidden=(10,), likelihood={"name": "gaussian", "scale": 0.1})
    report = estimate_report(model, data, [500, 500])
    assert report.draws == (500, 500) and report.rows == 80
    assert report.first_draws_seconds > 0 and report.figure_seconds > 0
    assert report.for_draws([500]).seconds < report.seconds < report.for_draws([500, 500, 500]).seconds


def test_each_probe_keeps_its_shortest_time_and_a_share_of_the_rows_is_scaled_up(monkeypatch):
    data = load_toy1d(n_train=40_000, n_test=10_000)
    model = BayesianMLP(1, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": 0.1})
    calls = []
    slow_once = iter([0.5, 0.0, 0.0, 0.3])  # a burst of other work lengthens one run of each probe

    def seconds(model, dataset, draws, folder):  # 0.1 s at 20 draws and 1 ms a draw more, on the probed rows
        calls.append((len(dataset.x_train), len(dataset.x_test), draws))
        return 0.1 + (draws - FEW_DRAWS) * 1e-3 + (next(slow_once) if len(calls) > 1 else 0.0)

    monkeypatch.setattr(report_cost, "_evaluation_seconds", seconds)
    monkeypatch.setattr(report_cost, "figure_seconds", lambda: 0.125)
    report = estimate_report(model, data, [300])
    assert PROBE_CELLS / 12_500 < MORE_DRAWS  # the probes run on 10,000 training and 2,500 test rows: a quarter of each
    assert calls == [(10_000, 2_500, FEW_DRAWS)] + [(10_000, 2_500, FEW_DRAWS), (10_000, 2_500, MORE_DRAWS)] * PROBE_REPEATS
    assert report.first_draws_seconds == pytest.approx(4 * 0.1)
    assert report.draw_seconds == pytest.approx(4 * 1e-3)
    assert report.seconds == pytest.approx(0.4 + 280 * 4e-3 + (FIGURES_FIXED + FIGURES_PER_FIT) * 0.125)
