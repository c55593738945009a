"""The SWAG rate benchmark runs end to end on a tiny set in the UCI layout and on a built-in set: a rate set from the
curvature fits and is checked (its Gaussian's p_D against D), a fixed rate far too large is a row with its overflow,
and the tables say which is which."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import swag_rate
from tests.benchmarks.test_laplace_uci import tiny_uci

pytestmark = pytest.mark.benchmarks


def test_run_on_a_tiny_set(tmp_path):
    uci = tiny_uci(tmp_path / "uci")
    out = tmp_path / "out"
    results = swag_rate.main(["--uci-dir", str(uci), "--datasets", "yacht", "--built-in", "toy1d:mlp", "--splits", "0",
                              "--fixed", "1e6", "--shares", "1", "--hidden", "3", "--batch-size", "8", "--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    overflowed, fitted, _, built_in = saved["rows"]
    assert overflowed["swag_lr"] == 1e6 and overflowed["error"].startswith("SWAG's SGD overflowed at epoch 0")
    assert fitted["step_share"] == 1 and np.isfinite(fitted["test_ll"])
    assert fitted["rate"] == pytest.approx(30 * 1 / fitted["curvature"])  # 30 training rows
    for row in (fitted, built_in):  # p_D of a Gaussian below the model's posterior width: the check passes
        assert 0 < row["effective_parameters"] < row["latent_values"] and row["check"] == "passed", row
    assert built_in["dataset"] == "toy1d:mlp" and np.isfinite(built_in["test_rmse"])
    table = (out / "results.md").read_text()
    assert "| yacht | 0 | swag_lr 1e+06 | SWAG's SGD overflowed at epoch 0" in table
    assert f"| yacht | 0 | step_share 1 | {fitted['test_rmse']:.3f} |" in table
    assert f"| {fitted['latent_values']} | passed |" in table and "| toy1d:mlp | 0 | step_share 1 |" in table
