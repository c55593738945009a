"""The estimates benchmark estimates each cell's fit, runs it and prints one row per fit: its estimate, the worst
case, the fit's wall time and their ratio."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks import estimates
from tests.benchmarks.test_laplace_uci import tiny_uci

pytestmark = pytest.mark.benchmarks


def test_each_fit_is_estimated_then_timed_and_the_row_says_both(tmp_path, capsys):
    uci = tiny_uci(tmp_path / "uci")
    rows = estimates.main(["--methods", "laplace", "--cells", "yacht:0", "--uci-dir", str(uci), "--relu"])
    [row] = rows
    assert (row["method"], row["cell"], row["network"], row["how counted"]) == ("laplace", "yacht:0", "ReLU (bnn uci)",
                                                                                "expected")
    assert 0 < row["estimate s"] <= row["at most s"] and row["fit s"] > 0 and row["fit / estimate"] > 0
    # the evidence search's refits, then the final polish: the first, the others' total and count, the last
    first, refits, final = row["polish iterations: first / refits (count) / final"].split(" / ")
    total, count = refits.rstrip(")").split(" (")
    assert int(first) >= 0 and int(total) >= 0 and int(count) >= 1 and int(final) >= 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| method | cell |") and printed[2].startswith("| laplace | yacht:0 | ReLU (bnn uci) |")
    with pytest.raises(SystemExit, match="needs --uci-dir"):
        estimates.main(["--methods", "map", "--cells", "yacht:0"])


def test_polishes_are_counted_in_order_and_the_method_restored(monkeypatch):
    def polish(problem, taken):  # a stand-in polish that takes `taken` iterations
        problem.iterations += taken
        return taken

    monkeypatch.setattr(estimates.MapProblem, "polish", polish)
    problem = SimpleNamespace(iterations=10)
    with estimates.polishes_counted() as counts:
        assert [estimates.MapProblem.polish(problem, taken) for taken in (5, 0, 3, 7)] == [5, 0, 3, 7]
    assert counts == [5, 0, 3, 7] and problem.iterations == 25
    assert estimates.MapProblem.polish is polish
    assert estimates.polish_column([34, 29, 0, 12, 128]) == "34 / 41 (3) / 128"
    assert estimates.polish_column([250]) == "250" and estimates.polish_column([]) == ""
