"""The SVI speed benchmark runs end to end (a few steps) and ends with its ratio line."""

from __future__ import annotations

import re

import pytest

from benchmarks import svi_speed

pytestmark = pytest.mark.benchmarks


def test_prints_a_table_and_ends_with_the_step_time_ratio(capsys, tmp_path):
    ratio = svi_speed.main(["--steps", "30", "--repeats", "1", "--csv", str(tmp_path / "runs.csv")])
    printed = capsys.readouterr().out
    lines = printed.strip().splitlines()
    assert svi_speed.tables_from_csv(tmp_path / "runs.csv") in printed  # the table again, from the CSV alone
    assert re.fullmatch(r"step_time_ratio=\d+\.\d{3}", lines[-1])
    assert float(lines[-1].split("=")[1]) == round(ratio, 3) and ratio > 0
    assert any(line.startswith("| pytorch BBB loop") for line in lines)
    for row in (svi_speed.MEANFIELD, svi_speed.DEFAULT, svi_speed.AUTONORMAL, svi_speed.LOCAL_REFERENCE):
        assert any(line.startswith(f"| {row} |") for line in lines)
    assert re.fullmatch(r"step_time_ratio_default_guide=\d+\.\d{3}", lines[-2])
