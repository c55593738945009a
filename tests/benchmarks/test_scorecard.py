"""The scorecard benchmark: one row per method, fitted on 80% of the training split and calibrated on the rest."""

from __future__ import annotations

import pytest
import torch
from bnn.datasets import load_toy1d

from benchmarks import scorecard

pytestmark = pytest.mark.benchmarks


def test_the_calibration_rows_are_held_out_of_the_fit():
    data = load_toy1d()
    part, (x_cal, y_cal) = scorecard.fit_and_calibration_parts(data, seed=0)
    assert len(part.x_train) == 80 and len(x_cal) == 20
    together = torch.cat([part.x_train, x_cal])
    assert torch.equal(together.sort(0).values, data.x_train.sort(0).values)  # a partition of the training rows
    assert torch.equal(part.x_test, data.x_test) and part.y_scaler is data.y_scaler


def test_prints_a_row_per_method_and_draws_the_figure(tmp_path, capsys):
    rows = scorecard.main(["--dataset", "toy1d", "--methods", "map,laplace", "--figures", str(tmp_path), "--",
                           "--hidden", "4", "--map-steps", "100"])
    printed = capsys.readouterr().out
    assert "| map | " in printed and "| laplace | " in printed and (tmp_path / "toy1d.png").exists()
    assert rows["map"]["ood_auroc_epistemic"] == 0.5  # a point estimate has no epistemic part
    assert all(0 <= row["conformal_coverage"] <= 1 and row["conformal_width"] > 0 for row in rows.values())
