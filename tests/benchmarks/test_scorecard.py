"""The scorecard benchmark: one row per method, fitted on 80% of the training split and calibrated on the rest."""

from __future__ import annotations

import pytest

from benchmarks import scorecard

pytestmark = pytest.mark.benchmarks


def test_prints_a_row_per_method_and_draws_the_figure(tmp_path, capsys):
    rows = scorecard.main(["--dataset", "toy1d", "--methods", "map,laplace", "--figures", str(tmp_path), "--",
                           "--hidden", "4", "--map-steps", "100"])
    printed = capsys.readouterr().out
    assert "| map | " in printed and "| laplace | " in printed and (tmp_path / "toy1d.png").exists()
    assert rows["map"]["ood_auroc_epistemic"] == 0.5  # a point estimate has no epistemic part
    assert all(0 <= row["conformal_coverage"] <= 1 and row["conformal_width"] > 0 for row in rows.values())
