"""The AutoNormal start benchmark runs end to end on short fits: both starts per prior and seed, each fit a row, and
the summary counts the fits that ignore their input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import autonormal_init

pytestmark = pytest.mark.benchmarks


def test_run_with_short_fits(tmp_path):
    out = tmp_path / "out"
    results = autonormal_init.main(["--priors", "ard", "--seeds", "0", "--steps", "20", "--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert [(row["prior"], row["start"], row["seed"]) for row in saved["rows"]] == [("ard", "drawn", 0),
                                                                                   ("ard", "medians", 0)]
    assert all(np.isfinite(row["final_elbo"]) and np.isfinite(row["test_ll"]) for row in saved["rows"])
    table = (out / "results.md").read_text()
    assert autonormal_init.tables_from_json(out / "results.json") in table  # the tables again, from the JSON alone
    for row in saved["rows"]:  # the summary counts the fits at or above the RMSE of predicting the mean, and the rising
        ignores = int(row["test_rmse"] >= autonormal_init.IGNORES_INPUT_RMSE)
        rising = int(row["converged"] is False)
        assert f"| ard | {row['start']} | 1 | {ignores} | {rising} | {row['final_elbo']:.1f} |" in table
        assert f"| ard | {row['start']} | 0 | {row['final_elbo']:.1f} | {row['test_ll']:.3f} |" in table
