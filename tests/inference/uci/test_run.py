import json
import math

import pandas as pd
import pytest
from bnn.inference.uci import run as uci_run
from bnn.inference.uci.protocol import failed_row
from bnn.inference.uci.run import run_uci
from bnn.inference.uci.store import CELLS_FOLDER

from tests.support.uci import FAST_SVI, write_uci_folder


@pytest.fixture
def unseen(tmp_path):
    """A data set the runner has never seen: 2,000 rows, a constant input column, two splits."""
    return write_uci_folder(tmp_path / "uci", "unseen", rows=2000, constant_column=True)


@pytest.mark.subprocess
def test_an_unseen_data_set_with_a_constant_column_runs_without_nan_says_what_it_did_and_resumes(unseen, tmp_path,
                                                                                                 monkeypatch):
    out = tmp_path / "run"
    with pytest.warns(UserWarning, match=r"unseen: inputs constant on the training rows \(split 0: input column\(s\) "
                                         r"\[2\]; split 1: input column\(s\) \[2\]\) are set to 0"):
        results = run_uci(unseen, "all", ["svi"], [0, 1], out, workers=2, overrides=FAST_SVI, progress=False)
    assert list(results["status"]) == ["ok", "ok"]
    assert results[["rmse", "test_ll", "seconds"]].map(math.isfinite).all().all()
    assert (results["selection"] == "ELBO: weights and noise scale by the ELBO; prior N(0, 1) fixed; except these, set "
                                    "by the user: steps=30, num_samples=20").all()
    assert pd.read_csv(out / "results.csv")["split"].tolist() == [0, 1]
    table = (out / "table.md").read_text()
    assert "| unseen | " in table and "| unseen | svi | ELBO" in table
    stored = json.loads((out / CELLS_FOLDER / "unseen" / "svi" / "split-1.json").read_text())
    assert stored["result"]["rmse"] == results["rmse"].iloc[1]

    def nothing_to_run(tables, cells, workers):
        assert cells == []  # every cell is finished: the rerun fits nothing
        yield from ()

    monkeypatch.setattr(uci_run, "run_local", nothing_to_run)
    with pytest.warns(UserWarning, match="constant"):
        again = run_uci(unseen, "unseen", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), results.reset_index(drop=True))
    with pytest.warns(UserWarning, match="constant"), pytest.raises(ValueError, match="unseen/svi/split-0 made with "
                                                                                       "other settings"):
        run_uci(unseen, "unseen", ["svi"], [0, 1], out, overrides={"svi": {"steps": 31}}, progress=False)


def test_a_failed_cell_is_reported_and_run_again(tiny_uci, tmp_path, monkeypatch):
    out = tmp_path / "run"

    def fails(tables, cells, workers):
        for cell in cells:
            yield failed_row(cell, "RuntimeError: lost", 1) if cell.split == 1 else {
                **failed_row(cell, "", 1), "status": "ok", "rmse": 1.0, "test_ll": -1.0, "seconds": 1.0,
                "verdict": "no check"}

    monkeypatch.setattr(uci_run, "run_local", fails)
    results = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    assert list(results["status"]) == ["ok", "failed"]
    table = (out / "table.md").read_text()
    assert "- tiny / svi / split 1, after 1 attempt(s): RuntimeError: lost" in table
    assert ("| tiny | svi | ELBO: weights and noise scale by the ELBO; prior N(0, 1) fixed; except these, set by the "
            "user: steps=30, num_samples=20 | 1 | 1 | 0 of 1 |") in table
    rerun = []

    def records_what_it_is_given(tables, cells, workers):
        rerun.extend(cells)
        yield from ()

    monkeypatch.setattr(uci_run, "run_local", records_what_it_is_given)
    results = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    assert [cell.split for cell in rerun] == [1]
    assert results["problems"].iloc[1] == "no result came back from the executor"  # never dropped silently


@pytest.mark.parametrize("kwargs, message", [
    ({"executor": "spark"}, "unknown executor 'spark'"),
    ({"address": "127.0.0.1:6379"}, "--address names a Ray cluster; pass --executor ray"),
    ({"workers": 0}, "workers must be a positive integer"),
    ({"max_retries": -1}, "max_retries must be a whole number >= 0"),
    ({"methods": "svi"}, "methods must be a non-empty list"),
    ({"methods": ["svy"]}, "svy"),
    ({"splits": []}, "splits must be a non-empty list"),
    ({"overrides": {"nuts": {"num_samples": 5}}}, r"--set names method\(s\) \['nuts'\] that are not in --methods"),
    ({"overrides": {"svi": {"stepz": 5}}}, "stepz"),
])
def test_bad_arguments_are_refused_before_any_work(tiny_uci, tmp_path, kwargs, message):
    arguments = {"methods": ["svi"], "splits": [0], **kwargs}
    with pytest.raises(ValueError, match=message):
        run_uci(tiny_uci, "tiny", arguments.pop("methods"), arguments.pop("splits"), tmp_path / "run", **arguments)
    assert not (tmp_path / "run").exists()


def test_out_inside_the_data_is_refused(tiny_uci):
    with pytest.raises(ValueError, match="lies inside the --uci-dir folder"):
        run_uci(tiny_uci, "tiny", ["svi"], [0], tiny_uci / "tiny" / "run")


def test_mc_dropout_chooses_its_rate_on_the_folders_grid_unless_fixed(tiny_uci):
    (tiny_uci / "tiny" / "dropout_rates.txt").write_text("0.01\n0.1\n")
    assert uci_run.validation_grid("mc-dropout", {}, tiny_uci / "tiny") == {"dropout_rate": [0.01, 0.1]}
    assert uci_run.validation_grid("mc-dropout", {"dropout_rate": 0.05}, tiny_uci / "tiny") == {}
    assert uci_run.validation_grid("svi", {}, tiny_uci / "tiny") == {}
    (tiny_uci / "tiny" / "dropout_rates.txt").write_text("0.01\n1.5\n")
    with pytest.raises(ValueError, match=r"must list dropout rates in \(0, 1\)"):
        uci_run.validation_grid("mc-dropout", {}, tiny_uci / "tiny")


def test_an_interruption_keeps_the_finished_cells_and_the_rerun_runs_the_rest(tiny_uci, tmp_path, monkeypatch):
    out, closed = tmp_path / "run", []

    def one_then_ctrl_c(tables, cells, workers):
        try:
            yield {**failed_row(cells[0], "", 1), "status": "ok", "rmse": 1.0, "test_ll": -1.0, "seconds": 1.0}
            raise KeyboardInterrupt
        finally:
            closed.append(True)  # the executor's clean-up ran: its cells in flight are ended

    monkeypatch.setattr(uci_run, "run_local", one_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt, match="Ctrl-C: the 1 finished cells are kept in .*; the same command runs"):
        run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    assert closed == [True]
    assert (out / CELLS_FOLDER / "tiny" / "svi" / "split-0.json").is_file()
    assert not (out / CELLS_FOLDER / "tiny" / "svi" / "split-1.json").exists()
    rerun = []

    def records_what_it_is_given(tables, cells, workers):
        rerun.extend(cell.split for cell in cells)
        yield from ()

    monkeypatch.setattr(uci_run, "run_local", records_what_it_is_given)
    run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    assert rerun == [1]
