"""The SG-MCMC step benchmark runs end to end on a tiny network: each row's first steps are its share over the
curvature recorded beside them, and the table has a row per fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import sgmcmc_steps

pytestmark = pytest.mark.benchmarks


def test_run_on_a_tiny_network(tmp_path):
    out = tmp_path / "out"
    results = sgmcmc_steps.main(["--methods", "sgld", "sghmc", "--shares", "0.5", "--seeds", "3", "--hidden", "3",
                                 "--set", "num_warmup=20", "--set", "num_samples=10", "--set", "map_steps=100",
                                 "--set", "map_method='sequential'", "--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert [(row["method"], row["step_share"], row["seed"]) for row in saved["rows"]] == [("sgld", 0.5, 3),
                                                                                         ("sghmc", 0.5, 3)]
    for row in saved["rows"]:
        assert row["num_warmup"] == 20 and np.isfinite(row["test_ll"]) and 0 <= row["coverage_90"] <= 1
        assert row["step_sizes"] == pytest.approx([0.5 / value for value in row["curvature"]], rel=1e-6)
    table = (out / "results.md").read_text()
    assert "| sgld | 0.5 | 3 |" in table and "| sghmc | 0.5 | 3 |" in table
