"""The cost benchmark: a plain training, then each method at its defaults on the same data, a line and a CSV row per
fit, and the tables made from the CSV."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from benchmarks import training_cost
from tests.support.interrupts import interrupt_fit_of

pytestmark = pytest.mark.benchmarks


def test_prints_and_keeps_a_row_per_fit_the_plain_training_first(tmp_path, capsys):
    csv = tmp_path / "results.csv"
    training_cost.main(["--dataset", "toy1d", "--methods", "map", "--csv", str(csv)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cost ")]
    assert [line.split()[1] for line in lines] == ["method=plain", "method=map"]
    frame = pd.read_csv(csv)
    assert list(frame["method"]) == ["plain", "map"]
    plain_seconds = frame["seconds"].iloc[0]
    assert (frame["ratio"] - frame["seconds"] / plain_seconds).abs().max() < 1e-9
    assert list(frame["target"]) == [1.0, training_cost.TARGETS["map"]]
    assert frame["rmse"].notna().all() and frame["accuracy"].isna().all()
    assert frame["command"].str.startswith("python -m benchmarks.training_cost").all()
    tables = training_cost.tables_from_csv(csv)
    assert "| method | seconds | ratio | target | met | rmse | test_ll | check |" in tables
    assert tables.count("\n| map | ") == 1 and "Runs:" in tables


def test_a_run_stopped_halfway_keeps_the_fits_it_finished(tmp_path, monkeypatch):
    csv = tmp_path / "results.csv"
    interrupt_fit_of(monkeypatch, training_cost, "laplace")
    with pytest.raises(KeyboardInterrupt):
        training_cost.main(["--dataset", "toy1d", "--methods", "map,laplace", "--csv", str(csv)])
    assert list(pd.read_csv(csv)["method"]) == ["plain", "map"]


def test_the_plain_training_computes_on_the_threads_a_fit_does(tmp_path, monkeypatch, two_threads_by_default):
    """With torch at two threads by default, the plain training runs on one, as every fit does, so that the ratio
    times both alike."""
    seen, plain_training = [], training_cost.plain_training

    def counted(*args):
        seen.append(torch.get_num_threads())
        return plain_training(*args)

    monkeypatch.setattr(training_cost, "plain_training", counted)
    training_cost.main(["--dataset", "toy1d", "--methods", "", "--csv", str(tmp_path / "results.csv")])
    assert seen == [1] and torch.get_num_threads() == 2


def test_the_readmes_cost_column_is_each_methods_ratio_on_the_digits_cnn():
    """The README's methods table gives each method's cost as its ratio to the plain training of the digits CNN, from
    the committed CSV (NUTS and SVGD, full-batch samplers of all of that network's weights, are not run there: each
    would take hours)."""
    readme = (training_cost.RESULTS.parents[2] / "README.md").read_text()
    table = readme[readme.index("| `method=` | what it is"):].split("\n\n", 1)[0].splitlines()
    assert table[0].endswith("| cost on the digits CNN |")
    frame = pd.read_csv(training_cost.CSV)
    ratios = frame[(frame["dataset"] == "digits") & (frame["model"] == "cnn")].set_index("method")["ratio"]
    for row in table[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        methods = [name.strip("` ") for name in cells[0].split(",")]
        expected = "not run" if methods in (["nuts"], ["svgd"]) else ", ".join(f"{ratios[name]:.1f}x" for name in methods)
        assert cells[-1] == expected, methods
