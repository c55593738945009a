"""The Laplace UCI benchmark runs end to end on a tiny set in the UCI layout and writes its table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import laplace_uci

pytestmark = pytest.mark.benchmarks


def tiny_uci(folder, name="yacht"):
    """40 rows of y = sin(x0) + x1 / 2 + noise in the UCI layout, a 3-unit network, split 0 = 30 train, 10 test."""
    root = folder / name
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    y = np.sin(x[:, 0]) + x[:, 1] / 2 + 0.1 * rng.normal(size=40)
    np.savetxt(root / "data.txt", np.column_stack([x, y]))
    (root / "index_features.txt").write_text("0\n1\n")
    (root / "index_target.txt").write_text("2\n")
    (root / "index_train_0.txt").write_text("\n".join(map(str, range(30))) + "\n")
    (root / "index_test_0.txt").write_text("\n".join(map(str, range(30, 40))) + "\n")
    (root / "n_hidden.txt").write_text("3\n")
    return folder


def test_run_then_report(tmp_path):
    uci = tiny_uci(tmp_path / "uci")
    laplace_uci.main(["run", "--uci-dir", str(uci), "--label", "now", "--datasets", "yacht", "--config", "untuned",
                      "--json", str(tmp_path / "now.json")])
    run = json.loads((tmp_path / "now.json").read_text())
    [row] = run["rows"]
    assert run["header"]["options"] == {"tune_prior_precision": False} and row["prior_precision_multiplier"] == 1.0
    assert (row["dataset"], row["rows"], row["weights"], row["structure"]) == ("yacht", 30, 13, "full")
    assert 0 <= row["coverage_50"] <= row["coverage_90"] <= 1 and row["map_converged"] is True
    laplace_uci.main(["report", str(tmp_path / "now.json"), "--out", str(tmp_path / "table.md")])
    table = (tmp_path / "table.md").read_text()
    assert "## now (tune_prior_precision=False)" in table and "| yacht | 30 | 13 | full |" in table
