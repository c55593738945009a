"""The SVI defaults benchmark: the mean-field gap it reports, and its table."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks import svi_defaults

pytestmark = pytest.mark.benchmarks


def test_the_mean_field_gap_of_a_correlated_gaussian_is_its_closed_form():
    # for two unit variances with correlation r: Lambda_kk = 1 / (1 - r^2), det Lambda = 1 / (1 - r^2),
    # so the gap 1/2 (2 ln Lambda_kk - ln det Lambda) = -1/2 ln(1 - r^2)
    r = 0.9
    covariance = torch.tensor([[1.0, r], [r, 1.0]], dtype=torch.float64)
    assert svi_defaults.mean_field_gap(covariance) == pytest.approx(-0.5 * math.log(1 - r**2), rel=1e-9)
    assert svi_defaults.mean_field_gap(torch.diag(torch.tensor([0.5, 3.0]))) == pytest.approx(0.0, abs=1e-12)


def test_every_setting_names_its_guide_schedule_and_sampling_or_is_fits_defaults():
    for name, options in svi_defaults.SETTINGS.items():
        if options:
            assert {"guide", "steps", "lr_schedule"} <= set(options), name
            if options["guide"] == "meanfield":
                assert "local_reparameterisation" in options["guide_options"], name


def test_the_table_has_one_row_per_setting_and_as_many_cells_as_columns():
    row = {"name": "a setting", "seconds": 1.0, "steps": 1000, "final_elbo": -1.0, "marks": {1000: -1.0},
           "rising": False, "noise": 0.1, "test_ll": 0.5, "test_rmse": 0.1, "coverage_50": 0.5, "coverage_90": 0.9}
    reference = {"log_evidence": 1.0, "gap": 2.0, "test_ll": 0.5, "coverage_50": 0.5, "coverage_90": 0.9}
    lines = svi_defaults.markdown([row], reference, "python -m benchmarks.svi_defaults", (1.0, 1.0, 1.0)).splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 3 and table[2].startswith("| a setting |")
    assert len({line.count("|") for line in table}) == 1
    assert "about -1.0" in "\n".join(lines)


def test_the_reference_and_the_table_come_back_from_the_csv_files(tmp_path):
    rows = [{"name": "a setting", "seconds": 1.25, "steps": 2500, "final_elbo": -1.5, "marks": {1000: -2.25, 2500: -1.5},
             "rising": None, "noise": 0.125, "test_ll": 0.5, "test_rmse": 0.1, "coverage_50": 0.5, "coverage_90": 0.9},
            {"name": "another", "seconds": 2.0, "steps": 1000, "final_elbo": -3.0, "marks": {1000: -3.0},
             "rising": True, "noise": 0.25, "test_ll": 0.25, "test_rmse": 0.2, "coverage_50": 0.4, "coverage_90": 0.8}]
    reference = {"log_evidence": 62.654, "gap": 486.96, "test_ll": 0.5, "coverage_50": 0.5, "coverage_90": 0.9}
    svi_defaults.write_csv(rows, reference, tmp_path)
    made = svi_defaults.tables_from_csv(tmp_path / "settings.csv", tmp_path / "reference.csv")
    printed = svi_defaults.markdown(rows, reference, "python -m benchmarks.svi_defaults", (1.0, 1.0, 1.0))
    assert made in printed and "about -424.3" in made
