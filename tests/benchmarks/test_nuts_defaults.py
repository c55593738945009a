"""The NUTS defaults benchmark parses its settings and prints one row per setting, on a tiny budget."""

from __future__ import annotations

import re

import pytest

from benchmarks import nuts_defaults

pytestmark = pytest.mark.benchmarks


def test_settings_parse_to_fit_options():
    assert nuts_defaults.parse_setting("num_warmup=400, target_accept=0.9,init=map") == {
        "num_warmup": 400, "target_accept": 0.9, "init": "map"}
    assert nuts_defaults.parse_setting("") == {}


def test_prints_one_row_per_setting(capsys):
    tiny = "num_warmup=10,num_samples=10,max_tree_depth=3,chain_method=sequential"
    nuts_defaults.main(["--settings", f"{tiny};{tiny},init=map"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {tiny}")]
    assert len(rows) == 2 and rows[1].startswith(f"| {tiny},init=map |")
    # weight R-hat, predictive R-hat, divergences, two ESS, tree depth (<= 3), gradients, seconds
    assert all(re.fullmatch(r"\| .* \| \d+\.\d{3} \| \d+\.\d{4} \| \d+ \| \d+ \| \d+ \| [0-3]\.\d \| \d+ \| \d+ \|", row)
               for row in rows), rows
