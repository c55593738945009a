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


def test_seeds_read_as_ranges_and_lists():
    assert nuts_defaults.seeds("0-3,7") == [0, 1, 2, 3, 7]


def test_prints_one_row_per_setting_and_seed_and_the_seeds_that_converged(capsys):
    # from the prior: the MAP start of each chain (the default) would be most of the time
    tiny = "num_warmup=10,num_samples=10,max_tree_depth=3,num_chains=2,chain_method=sequential,init=prior"
    other = f"{tiny},target_accept=0.95"
    nuts_defaults.main(["--settings", f"{tiny};{other}", "--seeds", "0-1"])
    printed = capsys.readouterr().out.splitlines()
    rows = [line for line in printed if line.startswith(f"| {tiny}")]
    assert [row.split(" | ")[:2] for row in rows] == [[f"| {tiny}", "0"], [f"| {tiny}", "1"], [f"| {other}", "0"],
                                                      [f"| {other}", "1"]]
    # weight R-hat, predictive R-hat, divergences, two ESS, tree depth (<= 3), gradients, seconds, verdict
    assert all(re.fullmatch(r"\| .* \| \d \| \d+\.\d{3} \| \d+\.\d{4} \| \d+ \| \d+ \| \d+ \| [0-3]\.\d \| \d+ \| \d+ "
                            r"\| (yes|no) \|", row) for row in rows), rows
    summaries = [line for line in printed if line.endswith("seeds converged")]
    assert [line.rsplit(": ", 1)[0] for line in summaries] == [tiny, other]
    assert all(re.fullmatch(r".*: [0-2] of 2 seeds converged", line) for line in summaries)
