"""``Posterior.summary``: ArviZ's table, without R-hat (and without ArviZ's shape error) where there is one chain."""

from __future__ import annotations

import logging

import arviz as az
import numpy as np
import pandas as pd
import pytest
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.diagnostics.draws_summary import draws_summary
from bnn.models import BayesianMLP


def draws(chains: int) -> az.InferenceData:
    rng = np.random.default_rng(0)
    return az.from_dict(posterior={"w": rng.normal(size=(chains, 200, 3)), "s": rng.gamma(2.0, size=(chains, 200))})


@pytest.mark.parametrize("kind", ["all", "stats", "diagnostics"])
def test_one_chain_gives_arviz_numbers_but_r_hat_and_logs_nothing(kind, caplog):
    idata = draws(1)
    with caplog.at_level(logging.DEBUG):
        table = draws_summary(idata, kind=kind)
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    expected = az.summary(idata, kind=kind).drop(columns="r_hat", errors="ignore")  # logs the shape error
    assert "r_hat" not in table.columns
    pd.testing.assert_frame_equal(table, expected)


def test_median_focus_and_the_callers_stat_funcs_come_after_the_diagnostics():
    table = draws_summary(draws(1), stat_focus="median", stat_funcs={"q90": lambda a: np.quantile(a, 0.9)})
    assert list(table.columns[-4:]) == ["mcse_median", "ess_median", "ess_tail", "q90"]
    with pytest.raises(ValueError, match="stat_focus must be one of"):
        draws_summary(draws(1), stat_focus="mode")


def test_two_chains_are_arviz_own_table_with_r_hat():
    idata = draws(2)
    pd.testing.assert_frame_equal(draws_summary(idata), az.summary(idata))


def test_an_svi_fit_summary_has_no_r_hat_and_logs_nothing(caplog):
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    posterior = fit(model, load_toy1d(n_train=30, n_test=10), "svi", steps=5, num_samples=20, progress=False)
    with caplog.at_level(logging.DEBUG, logger="arviz"):
        table = posterior.summary()
    assert not caplog.records and "r_hat" not in table.columns and table["ess_bulk"].notna().all()
