"""The grid-verdict comparison counts, per method and data set, the cells flagged in the grid and in the runs that fitted
the same cells again, on those cells only; broken fits are listed cell by cell."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks import grid_verdicts

pytestmark = pytest.mark.benchmarks


def cell(dataset: str, method: str, split: int, verdict: str, test_ll: float, status: str = "ok", problems: str = "",
         selection: str = "fixed: the method's defaults") -> dict:
    return {"dataset": dataset, "method": method, "split": split, "status": status, "verdict": verdict,
            "test_ll": test_ll, "problems": problems, "selection": selection}


def write_run(folder, cells: list[dict]) -> None:
    for row in cells:
        path = folder / "cells" / row["dataset"] / row["method"] / f"split-{row['split']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"fingerprint": "x", "result": row}))


def test_each_method_and_data_set_counts_the_cells_in_both_and_a_later_source_replaces_an_earlier(tmp_path, capsys):
    grid = tmp_path / "results.csv"
    pd.DataFrame([cell("yacht", "laplace", 0, "not converged", -1.0), cell("yacht", "laplace", 1, "not converged", -2.0),
                  cell("yacht", "laplace", 2, "not converged", -3.0),  # not run again: not counted
                  cell("energy", "laplace", 0, "converged", -0.5),
                  cell("yacht", "svi", 0, "converged", -4.0),
                  cell("yacht", "svi", 1, "", None, status="failed")]).to_csv(grid, index=False)
    write_run(tmp_path / "first", [cell("yacht", "laplace", 0, "not converged", -0.5),
                                   cell("energy", "laplace", 0, "not converged", -0.25),
                                   cell("yacht", "laplace", 1, "not converged", -1.5),
                                   cell("yacht", "svi", 0, "not converged", -3.0), cell("yacht", "svi", 1, "converged", -3.5)])
    second = tmp_path / "second.csv"  # a file of cells in the results.csv layout counts as a run
    pd.DataFrame([cell("yacht", "laplace", 1, "converged", -1.0)]).to_csv(second, index=False)
    stopped = "ELBO: ...; except these, set by the user: steps=100"
    write_run(tmp_path / "broken", [cell("yacht", "svi", 0, "not converged", -9.0, selection=stopped),
                                    cell("energy", "svi", 0, "converged", -8.0, selection=stopped)])
    broken_more = tmp_path / "broken-more.csv"  # one file may hold the same cell broken in two ways: both count
    pd.DataFrame([cell("yacht", "svi", 0, "not converged", -9.0, selection=stopped.replace("100", "300")),
                  cell("yacht", "svi", 0, "converged", -7.0, selection=stopped.replace("100", "1000"))]).to_csv(
        broken_more, index=False)
    fractions, listed = grid_verdicts.main(["--grid", str(grid), "--runs", str(tmp_path / "first"), str(second),
                                            "--broken", str(tmp_path / "broken"),
                                            str(broken_more)])
    assert fractions.to_dict("records") == [
        {"method": "laplace", "dataset": "energy", "cells": 1, "flagged_before": 0, "flagged_after": 1,
         "test_ll_before": -0.5, "test_ll_after": -0.25},
        {"method": "laplace", "dataset": "yacht", "cells": 2, "flagged_before": 2, "flagged_after": 1,
         "test_ll_before": -1.5, "test_ll_after": -0.75},
        {"method": "svi", "dataset": "yacht", "cells": 1, "flagged_before": 0, "flagged_after": 1,
         "test_ll_before": -4.0, "test_ll_after": -3.0}]  # the grid's failed split 1 is left out
    assert listed.to_dict("records") == [  # the same cell in two sources, and twice in one: each counted
        {"method": "svi", "set": "steps=100", "datasets": "energy, yacht", "cells": 2, "flagged": 1},
        {"method": "svi", "set": "steps=300", "datasets": "yacht", "cells": 1, "flagged": 1},
        {"method": "svi", "set": "steps=1000", "datasets": "yacht", "cells": 1, "flagged": 0}]
    printed = capsys.readouterr().out
    assert "| laplace | yacht | 2 | 2 | 1 | -1.5 | -0.75 |" in printed
    assert "| laplace | 2 | 3 | 2 | 2 |" in printed  # per method over its data sets
    assert "| svi | steps=100 | energy, yacht | 2 | 1 |" in printed


def test_saved_cells_keep_the_grids_columns_and_a_saved_file_is_extended_in_place(tmp_path):
    grid = tmp_path / "results.csv"
    pd.DataFrame([cell("yacht", "svi", 0, "not converged", -4.0), cell("yacht", "laplace", 0, "converged", -1.0),
                  cell("energy", "laplace", 0, "converged", -0.5)]).to_csv(grid, index=False)
    write_run(tmp_path / "first", [dict(cell("yacht", "svi", 0, "converged", -3.0), seconds_per_step=0.01),
                                   cell("yacht", "laplace", 0, "not converged", -0.75)])
    saved = tmp_path / "after.csv"
    grid_verdicts.main(["--grid", str(grid), "--runs", str(tmp_path / "first"), "--save-runs", str(saved)])
    written = pd.read_csv(saved, keep_default_na=False)
    assert list(written.columns) == list(pd.read_csv(grid).columns)  # a key the grid lacks is left out
    assert written[["method", "dataset", "test_ll"]].values.tolist() == [["laplace", "yacht", -0.75], ["svi", "yacht", -3.0]]

    write_run(tmp_path / "second", [cell("energy", "laplace", 0, "not converged", -0.25),
                                    cell("yacht", "svi", 0, "not converged", -2.0)])  # replaces the saved cell
    fractions, _ = grid_verdicts.main(["--grid", str(grid), "--runs", str(saved), str(tmp_path / "second"),
                                       "--save-runs", str(saved)])
    extended = pd.read_csv(saved, keep_default_na=False)
    assert extended[["method", "dataset", "test_ll"]].values.tolist() == [
        ["laplace", "energy", -0.25], ["laplace", "yacht", -0.75], ["svi", "yacht", -2.0]]
    assert fractions["flagged_after"].tolist() == [1, 1, 1]
    assert not (tmp_path / "after.csv.tmp").exists()


def test_every_broken_cell_is_saved_in_the_order_read(tmp_path):
    grid = tmp_path / "results.csv"
    pd.DataFrame([cell("yacht", "svi", 0, "not converged", -4.0)]).to_csv(grid, index=False)
    stopped = "ELBO: ...; except these, set by the user: steps="
    write_run(tmp_path / "broken-100", [cell("yacht", "svi", 0, "not converged", -9.0, selection=stopped + "100")])
    write_run(tmp_path / "broken-300", [cell("yacht", "svi", 0, "not converged", -8.0, selection=stopped + "300")])
    saved = tmp_path / "broken.csv"
    grid_verdicts.main(["--grid", str(grid), "--runs", str(tmp_path / "broken-100"), "--broken",
                        str(tmp_path / "broken-100"), str(tmp_path / "broken-300"), "--save-broken", str(saved)])
    assert pd.read_csv(saved)["test_ll"].tolist() == [-9.0, -8.0]  # the same cell twice: both kept
