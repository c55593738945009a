"""The MC dropout replica benchmark runs end to end on a tiny data set; its replica of the paper's network fits the
data and scores its predictive in the target's units."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks import mc_dropout_replica
from tests.support.uci import write_uci_folder

pytestmark = pytest.mark.benchmarks


def test_run_on_a_tiny_data_set(tmp_path):
    uci = write_uci_folder(tmp_path / "uci", "tiny", rows=60)
    out = tmp_path / "out"
    results = mc_dropout_replica.main(["--uci-dir", str(uci), "--dataset", "tiny", "--splits", "0", "1", "--epochs", "3",
                                       "--dropout-rate", "0.05", "--tau", "10", "--draws", "20", "--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert [(row["split"], row["epochs"], row["tau"]) for row in saved["rows"]] == [(0, 3, 10.0), (1, 3, 10.0)]
    assert all(np.isfinite([row[key] for key in ("ours_rmse", "ours_test_ll", "replica_rmse", "replica_test_ll")]).all()
               for row in saved["rows"])
    table = (out / "results.md").read_text()
    assert "| tiny | 0 | 3 | 0.05 | 10 | 0.01 |" in table and "| mean of 2 |" in table


def test_the_replica_fits_the_data_and_scores_the_gaussian_of_precision_tau_in_the_targets_units():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    y = 10 + 3 * (np.sin(x[:, 0]) + x[:, 1] / 2) + 0.03 * rng.normal(size=300)
    # at a rate of 1e-6 no unit is dropped (about one pass in ten thousand drops one), so every pass is the same
    # network and the mixture is one Gaussian: log N(y; f, 1/tau) averaged, 1/2 log(tau / 2 pi) - tau RMSE^2 / 2
    scores = mc_dropout_replica.replica(x[:250], y[:250], x[250:], y[250:], hidden=50, epochs=300, rate=1e-6, tau=2.0,
                                        length_scale=0.01, draws=5, seed=0)
    assert scores["rmse"] < 0.5  # the target's sd is about 3: the network has learned it
    assert scores["test_ll"] == pytest.approx(0.5 * math.log(2.0 / (2 * math.pi)) - scores["rmse"] ** 2, rel=1e-9)
