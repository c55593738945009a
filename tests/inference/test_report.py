from __future__ import annotations

import pandas as pd
import pytest

from inference.cli import main
from inference.report import markdown_table, slug


def test_compare_command_writes_the_report(tmp_path):
    out = tmp_path / "report"
    main(["compare", "--methods", "svi,svi:autonormal", "--hidden", "3", "--steps", "20", "--num-draws", "40",
          "--out", str(out), "--quiet"])
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "comparison.csv", "ranking.csv", "predictive.png", "overlay.png", "forest.png",
            "marginals.png", "std_vs_error.png", "posterior-svi-autonormal.nc", "posterior-svi-autonormal-2.nc"} <= names
    report = (out / "report.md").read_text()
    assert "python -m inference compare --methods svi,svi:autonormal" in report or "Command:" in report
    for png in (p for p in names if p.endswith(".png")):
        assert f"]({png})" in report
    assert "pyro-ppl 1.9.2" in report and "arviz 0.23.4" in report
    table = pd.read_csv(out / "comparison.csv", index_col=0)
    assert list(table.index) == ["svi (autonormal)", "svi (autonormal) #2"]


def test_options_that_no_method_takes_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--methods", "svi", "--num-warmup", "10", "--out", str(tmp_path / "r"), "--quiet"])
    assert exit_info.value.code == 2
    assert "apply to none of the methods ['svi']" in capsys.readouterr().err


def test_markdown_table_and_slugs():
    frame = pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x", None]}, index=["svi (meanfield)", "nuts"])
    assert markdown_table(frame).splitlines() == ["|  | a | b |", "|---|---|---|", "| svi (meanfield) | 1.235 | x |",
                                                  "| nuts |  |  |"]
    assert slug("svi (meanfield) #2") == "svi-meanfield-2"
