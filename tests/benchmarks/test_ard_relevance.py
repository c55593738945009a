"""The ARD relevance benchmark runs end to end on a tiny set in the UCI layout, with both methods, and writes its
tables; its separation summary counts what it says."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import ard_relevance
from tests.benchmarks.test_laplace_uci import tiny_uci

pytestmark = pytest.mark.benchmarks


def test_separation_counts_the_noise_columns_below_every_real_one_and_the_auc():
    summary = ard_relevance.separation(np.array([0.9, 0.5, 0.1, 0.6, 0.5]), real=2)
    assert summary["noise_below_every_real"] == 1  # 0.1 only: 0.5 ties the smallest real column
    assert summary["auc"] == pytest.approx((1 + 1 + 1 + 1 + 0 + 0.5) / 6)
    assert (summary["largest_noise_median"], summary["smallest_real_median"]) == (0.6, 0.5)


def test_run_on_a_tiny_set(tmp_path):
    uci = tiny_uci(tmp_path / "uci")
    out = tmp_path / "out"
    results = ard_relevance.main(["--uci-dir", str(uci), "--dataset", "yacht", "--noise-columns", "2", "--hidden", "3",
                                  "--methods", "svi", "nuts", "laplace", "--steps", "30", "--num-warmup", "20", "--num-samples",
                                  "10", "--num-chains", "1", "--max-tree-depth", "3", "--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert [row["method"] for row in saved["rows"]] == ["svi", "nuts", "laplace"]
    for row in saved["rows"]:
        assert [column["kind"] for column in row["columns"]] == ["real", "real", "noise", "noise"]
        assert all(0 < c["q05"] <= c["median"] <= c["q95"] for c in row["columns"])
        assert 0 <= row["auc"] <= 1 and np.isfinite(row["test_ll"])
    assert all(c["q05"] == c["median"] == c["q95"] for c in saved["rows"][2]["columns"])  # Laplace's type-II point
    table = (out / "results.md").read_text()
    assert "# ARD relevance: yacht split 0 + 2 noise columns" in table and "| 3 | noise |" in table
