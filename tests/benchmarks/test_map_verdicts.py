"""The MAP verdict benchmark fits each cell with each method as `bnn uci` does and appends one line per fit: a broken
fit (one iteration) is flagged and says why; the options reach the fit."""

from __future__ import annotations

import json

import pytest

from benchmarks import map_verdicts
from tests.benchmarks.test_laplace_uci import tiny_uci

pytestmark = pytest.mark.benchmarks


def test_a_broken_fit_of_each_method_is_flagged_and_its_line_says_why(tmp_path):
    uci = tiny_uci(tmp_path / "uci")
    out = tmp_path / "verdicts.jsonl"
    rows = map_verdicts.main(["--uci-dir", str(uci), "--methods", "laplace,map", "--cells", "yacht:0", "--out", str(out),
                              "map_steps=1", "map_max_iter=1"])
    saved = [json.loads(line) for line in out.read_text().splitlines()]
    assert saved == json.loads(json.dumps(rows))
    assert [(row["method"], row["dataset"], row["split"]) for row in saved] == [("laplace", "yacht", 0), ("map", "yacht", 0)]
    for row in saved:
        assert row["options"] == {"map_steps": 1, "map_max_iter": 1}
        assert row["converged"] is False and "did not converge" in row["problems"][0]
        assert row["map_newton_decrement"] > 0.1 and row["map_last_rise"] is None  # no whole L-BFGS window in 1 iteration
        assert row["seconds"] > 0 and row["test_ll"] == row["test_ll"]  # not NaN
