import json
import math
import os
import warnings

import pandas as pd
import pytest

from bnn.experiments.uci import run as uci_run
from bnn.experiments.uci.protocol import failed_row
from bnn.experiments.uci.run import run_uci
from bnn.experiments.uci.store import CELLS_FOLDER
from bnn.runtime.atomic import MARKER, atomic_directory
from bnn.runtime.machine import machine
from bnn.runtime.run_folder import LOCK_FILE
from tests.support.uci import FAST_SVI, write_uci_folder


@pytest.fixture
def unseen(tmp_path):
    """A data set the runner has never seen: 2,000 rows, a constant input column, two splits."""
    return write_uci_folder(tmp_path / "uci", "unseen", rows=2000, constant_column=True)


@pytest.mark.subprocess
def test_an_unseen_data_set_with_a_constant_column_runs_without_nan_says_what_it_did_and_resumes(unseen, tmp_path,
                                                                                                 monkeypatch):
    out = tmp_path / "run"
    with pytest.warns(UserWarning, match=r"unseen: inputs constant on the training rows \(split 0: column 2; split 1: "
                                         r"column 2 of data.txt, counted from 0 as index_features.txt counts them\) are "
                                         "set to 0"):
        results = run_uci(unseen, "all", ["svi"], [0, 1], out, workers=1, overrides=FAST_SVI, progress=False)
    assert list(results["status"]) == ["ok", "ok"]
    assert results[["rmse", "test_ll", "seconds"]].map(math.isfinite).all().all()
    assert (results["selection"] == "ELBO: weights and noise scale by the ELBO; prior N(0, 1) fixed; except these, set "
                                    "by the user: steps=30, num_samples=20").all()
    assert pd.read_csv(out / "results.csv")["split"].tolist() == [0, 1]
    table = (out / "table.md").read_text()
    assert "| unseen | " in table and "| unseen | svi | ELBO" in table
    stored = json.loads((out / CELLS_FOLDER / "unseen" / "svi" / "split-1.json").read_text())
    assert stored["result"]["rmse"] == results["rmse"].iloc[1] and stored["machine"] == machine()

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
    ({"seed": -5}, r"seed \(--seed\) must be a non-negative integer below 2\*\*32, got -5"),
    ({"seed": 99999999999999999999}, r"seed \(--seed\) must be a non-negative integer below 2\*\*32"),
    ({"seed": 2**32 - 1, "splits": [0, 1]}, r"seed \+ split .*4294967295 \+ 1\) must be a non-negative integer below"),
    ({"overrides": {"nuts": {"num_samples": 5}}}, r"--set names method\(s\) \['nuts'\] that are not in --methods"),
    ({"overrides": {"svi": {"stepz": 5}}}, "stepz"),
    ({"conformal": 1.5}, r"conformal calibration share must lie in \(0, 1\), got 1.5"),
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
    for text in ("0.01\n1.5\n", "0.1 abc\n"):
        (tiny_uci / "tiny" / "dropout_rates.txt").write_text(text)
        with pytest.raises(ValueError, match=f"{tiny_uci / 'tiny' / 'dropout_rates.txt'} must list dropout rates in "
                                             r"\(0, 1\)"):
            uci_run.validation_grid("mc-dropout", {}, tiny_uci / "tiny")


def test_mc_dropouts_cells_take_the_papers_options_and_the_folders_epochs_grid_under_the_users_set(tiny_uci, tmp_path,
                                                                                                  monkeypatch):
    (tiny_uci / "tiny" / "n_epochs.txt").write_text("4\n")
    (tiny_uci / "tiny" / "tau_values.txt").write_text("0.5 2\n")
    given = []

    def records_what_it_is_given(tables, cells, workers):
        given.extend(cells)
        yield from map(ok_row, cells)

    monkeypatch.setattr(uci_run, "run_local", records_what_it_is_given)
    run_uci(tiny_uci, "tiny", ["mc-dropout"], [0], tmp_path / "a", progress=False)
    [cell] = given
    assert cell.options == {"batch_size": 128, "lr": 1e-3, "weight_init": "glorot", "num_samples": 10_000, "epochs": 40,
                            "progress": False, "seed": 0}
    assert cell.validation == {"dropout_rate": [0.005, 0.01, 0.05, 0.1], "noise_precision": [0.5, 2.0]}
    given.clear()
    run_uci(tiny_uci, "tiny", ["mc-dropout"], [0], tmp_path / "b", progress=False,
            overrides={"mc-dropout": {"steps": 7, "dropout_rate": 0.1, "num_samples": 5}})
    [cell] = given
    assert cell.options["steps"] == 7 and "epochs" not in cell.options and cell.options["num_samples"] == 5
    assert cell.validation == {"noise_precision": [0.5, 2.0]}


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


def ok_row(cell):
    return {**failed_row(cell, "", 1), "status": "ok", "rmse": 1.0, "test_ll": -1.0, "seconds": 1.0, "verdict": "no check"}


def never_runs(tables, cells, workers):
    raise AssertionError(f"no cell may run: {cells}")


def test_a_folder_of_the_users_own_files_is_refused_before_any_work_and_left_as_it_was(tiny_uci, tmp_path, monkeypatch):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.csv").write_text("mine\n")
    (out / "table.md").write_text("mine\n")
    monkeypatch.setattr(uci_run, "run_local", never_runs)
    with pytest.raises(ValueError, match=r"mine holds files `bnn uci` did not write \(results.csv, table.md\); it writes "
                                         "only into a new or empty folder or a run of its own"):
        run_uci(tiny_uci, "tiny", ["svi"], [0], out, overrides=FAST_SVI, progress=False)
    assert sorted(path.name for path in out.iterdir()) == ["results.csv", "table.md"]
    assert (out / "results.csv").read_text() == (out / "table.md").read_text() == "mine\n"


def test_a_fit_result_and_a_uci_run_never_write_into_each_other(tiny_uci, tmp_path, monkeypatch):
    fitted = tmp_path / "fitted"
    with atomic_directory(fitted, writer="bnn fit") as staging:  # what bnn fit, bnn compare and Posterior.save leave
        (staging / "fit.json").write_text("{}")
    monkeypatch.setattr(uci_run, "run_local", never_runs)
    with pytest.raises(ValueError, match="fitted holds a result of `bnn fit` or `bnn compare`"):
        run_uci(tiny_uci, "tiny", ["svi"], [0], fitted, overrides=FAST_SVI, progress=False)
    assert sorted(path.name for path in fitted.iterdir()) == [MARKER, "fit.json"]

    run = tmp_path / "run"
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: map(ok_row, cells))
    run_uci(tiny_uci, "tiny", ["svi"], [0], run, overrides=FAST_SVI, progress=False)
    with pytest.raises(ValueError, match="run holds a run of `bnn uci`.*which only that command writes into"):
        with atomic_directory(run, writer="bnn fit", overwrite=True):
            pass
    assert (run / CELLS_FOLDER / "tiny" / "svi" / "split-0.json").is_file()


def test_a_second_run_of_a_folder_is_refused_while_the_first_writes(tiny_uci, tmp_path, monkeypatch):
    out, refused = tmp_path / "run", []

    def runs_a_second_grid_meanwhile(tables, cells, workers):
        with pytest.raises(ValueError, match=f"another run \\(process {os.getpid()}\\) is writing into .*run now"):
            run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides={"svi": {"steps": 31}}, progress=False)
        refused.append(True)
        yield from map(ok_row, cells)

    monkeypatch.setattr(uci_run, "run_local", runs_a_second_grid_meanwhile)
    results = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    assert refused == [True] and list(results["status"]) == ["ok", "ok"]
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: iter(()))
    run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)  # the lock ended with the run


def test_a_run_made_before_runs_were_marked_is_resumed_and_marked(tiny_uci, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: map(ok_row, cells))
    first = run_uci(tiny_uci, "tiny", ["svi"], [0], out, overrides=FAST_SVI, progress=False)
    (out / MARKER).unlink()
    (out / LOCK_FILE).unlink()
    monkeypatch.setattr(uci_run, "run_local", never_runs)
    again = run_uci(tiny_uci, "tiny", ["svi"], [0], out, overrides=FAST_SVI, progress=False)
    pd.testing.assert_frame_equal(again, first)
    assert json.loads((out / MARKER).read_text())["writer"] == "uci"


@pytest.mark.parametrize("content", ["[]", "{}", '{"fingerprint": "f"}', '{"fingerprint": "f", "result": null}',
                                     '{"fingerprint": "f", "result": {"dataset": "tiny"}}', "{", "folder"])
def test_a_tampered_cell_file_is_named_before_any_work(tiny_uci, tmp_path, monkeypatch, content):
    out = tmp_path / "run"
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: map(ok_row, cells))
    run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    cell = out / CELLS_FOLDER / "tiny" / "svi" / "split-1.json"
    cell.unlink()
    cell.mkdir() if content == "folder" else cell.write_text(content)
    monkeypatch.setattr(uci_run, "run_local", never_runs)
    with pytest.raises(ValueError, match=f"{cell} is not a cell file of bnn uci .*; remove it to run that cell again"):
        run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)


def test_a_cell_result_edited_after_it_was_written_is_named_before_any_work(tiny_uci, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: map(ok_row, cells))
    first = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)
    cell = out / CELLS_FOLDER / "tiny" / "svi" / "split-1.json"
    stored = json.loads(cell.read_text())
    monkeypatch.setattr(uci_run, "run_local", never_runs)
    pd.testing.assert_frame_equal(run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False),
                                  first)  # the digest of an untouched cell holds
    cell.write_text(json.dumps({**stored, "result": {**stored["result"], "test_ll": 9.0}}))
    with pytest.raises(ValueError, match=f"{cell} was changed after bnn uci wrote it: .*remove it to run that cell"):
        run_uci(tiny_uci, "tiny", ["svi"], [0, 1], out, overrides=FAST_SVI, progress=False)


def test_a_cell_that_failed_runs_again_when_its_data_changed(tiny_uci, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(uci_run, "run_local", lambda tables, cells, workers: (
        failed_row(cell, "ValueError: the targets y contains infinite values", 1) for cell in cells))
    with pytest.raises(ValueError, match="every cell failed on bad input, such as tiny / svi / split 0: the targets y "
                                         "contains infinite values .*table.md lists each.*fix it and run the same command"):
        run_uci(tiny_uci, "tiny", ["svi"], [0], out, overrides=FAST_SVI, progress=False)
    assert json.loads((out / CELLS_FOLDER / "tiny" / "svi" / "split-0.json").read_text())["result"]["status"] == "failed"
    data = tiny_uci / "tiny" / "data.txt"
    data.write_text(data.read_text().replace("1", "2", 1))  # the data fixed
    rerun = []

    def records_what_it_is_given(tables, cells, workers):
        rerun.extend(cells)
        yield from map(ok_row, cells)

    monkeypatch.setattr(uci_run, "run_local", records_what_it_is_given)
    with pytest.warns(UserWarning, match="tiny/svi/split-0 failed in an earlier run with other settings or data; it runs "
                                         "again with these"):
        results = run_uci(tiny_uci, "tiny", ["svi"], [0], out, overrides=FAST_SVI, progress=False)
    assert len(rerun) == 1 and list(results["status"]) == ["ok"]


def test_a_constant_input_is_named_by_its_data_txt_column_counted_from_0_at_the_librarys_line_under_the_command(unseen):
    table = uci_run.read_uci_table(unseen, "unseen", [0, 1])
    launcher = compile("warn_constant_columns(table)", "/somewhere/.venv/bin/bnn", "exec")  # the console script's line
    for where, expected in ((launcher, uci_run.__file__), (compile("warn_constant_columns(table)", __file__, "exec"),
                                                           __file__)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(where, {"__name__": "__main__" if where is launcher else __name__,
                         "warn_constant_columns": uci_run.warn_constant_columns, "table": table})
        (warning,) = caught
        assert warning.filename == expected  # the command's reader gets the library's line, a script its own
    assert str(warning.message).startswith("unseen: inputs constant on the training rows (split 0: column 2; split 1: "
                                           "column 2 of data.txt, counted from 0 as index_features.txt counts them)")


def test_the_progress_names_the_cells_running_from_the_start_and_each_cells_verdict_as_it_finishes(tiny_uci, tmp_path,
                                                                                                  monkeypatch, capsys):
    def verdicts(tables, cells, workers):
        for cell in cells:
            yield {**failed_row(cell, "", 1), "status": "ok", "rmse": 1.0, "test_ll": -1.0, "seconds": 1.0,
                   "verdict": "not converged" if cell.split == 0 else "converged"}

    monkeypatch.setattr(uci_run, "run_local", verdicts)
    monkeypatch.setenv("BNN_PROGRESS", "1")
    run_uci(tiny_uci, "tiny", ["svi"], [0, 1], tmp_path / "run", workers=1, overrides=FAST_SVI, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("uci grid: 0/2 (0%), ") and lines[0].endswith(", running tiny/svi/split-0"), lines
    assert lines[1].startswith("uci grid, tiny/svi/split-0 not converged: 1/2 (50%), ")  # not "ok"
    assert lines[1].endswith(", running tiny/svi/split-1")
    assert lines[2].startswith("uci grid, tiny/svi/split-1 converged: 2/2 (100%), ") and len(lines) == 3
