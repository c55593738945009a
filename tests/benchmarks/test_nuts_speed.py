"""The NUTS speed benchmark runs end to end on a tiny budget; with NumPyro installed it ends with its ratio line."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks import nuts_speed

pytestmark = pytest.mark.benchmarks

TINY = ["--warmup", "10", "--draws", "10", "--repeats", "1", "--backends", "numpy,eager"]


def test_tree_depth_and_rows():
    assert nuts_speed.mean_tree_depth(np.array([1, 3, 7, 1023])) == np.mean([1, 2, 3, 10])
    run = nuts_speed.Run(seconds=2.0, gradients=4000, tree_depth=3.0, divergences=1, ess_bulk=np.array([10.0, 30.0, 50.0]))
    row = run.row()
    assert row["grads_per_s"] == 2000 and row["ess_per_s_median"] == 15 and row["ess_per_s_min"] == 5
    assert row["ess_per_1k_grads"] == 7.5


def test_collection_engine_prints_its_table(capsys):
    assert nuts_speed.main([*TINY, "--engines", "nutpie"]) == {}
    out = capsys.readouterr().out
    assert re.search(r"numpy +build +\d+\.\d+ s +\d+\.\d+ us", out)
    assert re.search(r"^\| nutpie \| ", out, re.M) and "ess_per_s_ratio" not in out


def test_side_by_side_with_numpyro_ends_with_the_ratio(capsys):
    pytest.importorskip("numpyro")
    ratios = nuts_speed.main([*TINY, "--engines", "nutpie,numpyro"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"ess_per_s_ratio=\d+\.\d{3}", last)
    assert float(last.split("=")[1]) == round(ratios["nutpie"]["ess_per_s_median"], 3)
    assert ratios["numpyro"] == {"grads_per_s": 1.0, "ess_per_s_median": 1.0, "ess_per_s_min": 1.0}


def test_the_ratio_line_divides_by_the_numpyro_row_without_numpyro_installed(capsys, monkeypatch):
    """The ratio code runs everywhere: NumPyro's run is replaced by a fixed one (median bulk ESS 3 in 1 s)."""
    reference = nuts_speed.Run(seconds=1.0, gradients=1000, tree_depth=5.0, divergences=0, ess_bulk=np.array([2.0, 3.0, 9.0]))
    monkeypatch.setattr(nuts_speed, "run_numpyro", lambda dataset, warmup, draws, seed: reference)
    ratios = nuts_speed.main([*TINY, "--engines", "nutpie,numpyro"])
    out = capsys.readouterr().out
    nutpie_row = re.search(r"^\| nutpie \| (.+) \|$", out, re.M).group(1).split(" | ")
    ess_per_s_median = float(nutpie_row[4])  # columns: wall_s, grads_per_s, tree_depth, divergences, ess_per_s_median
    assert ratios["nutpie"]["ess_per_s_median"] == pytest.approx(ess_per_s_median / 3.0, rel=1e-3)
    assert out.strip().splitlines()[-1] == f"ess_per_s_ratio={ratios['nutpie']['ess_per_s_median']:.3f}"
