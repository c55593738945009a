import sys

import pytest

from bnn.cli.main import main
from bnn.experiments.uci import run as uci_run
from bnn.experiments.uci.protocol import failed_row


def finished(cell, **fields):
    """The row ``run_local`` yields for ``cell`` when it finished, with ``fields`` over the defaults."""
    return {**failed_row(cell, "", 1), "status": "ok", "rmse": 1.0, "test_ll": -1.0, "seconds": 0.1, "verdict": "no check",
            **fields}


def command(tiny_uci, out, *extra):
    return ["uci", "--uci-dir", str(tiny_uci), "--datasets", "tiny", "--methods", "svi", "--splits", "0-1",
            "--out", str(out), "--quiet", *extra]


def test_bnn_uci_runs_the_grid_with_the_options_set_and_prints_the_table(tiny_uci, tmp_path, monkeypatch, capsys):
    given = []

    def scores(tables, cells, workers):  # in this process: the command's wiring is under test, not the fits
        given.extend(cells)
        for cell in cells:
            yield finished(cell, rmse=1.0 + cell.split)

    monkeypatch.setattr(uci_run, "run_local", scores)
    assert main(command(tiny_uci, tmp_path / "run", "--set", "svi.steps=7", "--set", "svi.guide=meanfield",
                        "--seed", "10")) == 0
    assert [(cell.split, cell.options["steps"], cell.options["guide"], cell.options["seed"]) for cell in given] == [
        (0, 7, "meanfield", 10), (1, 7, "meanfield", 11)]
    printed = capsys.readouterr().out
    assert "| tiny | 1.500 ± 0.500 (2) |" in printed and "written: " in printed
    assert "--set svi.steps=7" in (tmp_path / "run" / "table.md").read_text()


def test_conformal_reaches_every_cell_and_its_table_is_written(tiny_uci, tmp_path, monkeypatch):
    given = []

    def scores(tables, cells, workers):
        given.extend(cells)
        for cell in cells:
            yield finished(cell, conformal_coverage=0.9 - 0.1 * cell.split, conformal_width=2.0)

    monkeypatch.setattr(uci_run, "run_local", scores)
    assert main(command(tiny_uci, tmp_path / "run", "--conformal", "0.2")) == 0
    assert [cell.conformal for cell in given] == [0.2, 0.2]
    assert "| tiny | svi | 0.850 ± 0.050 (2) | 2.000 ± 0.000 (2) |" in (tmp_path / "run" / "table.md").read_text()


def test_workers_beyond_the_cells_are_not_started(tiny_uci, tmp_path, monkeypatch):
    started = []

    def scores(tables, cells, workers):
        started.append(workers)
        for cell in cells:
            yield finished(cell)

    monkeypatch.setattr(uci_run, "run_local", scores)
    assert main(command(tiny_uci, tmp_path / "run", "--workers", "99999999999")) == 0
    assert started == [2]  # the two cells of splits 0-1


@pytest.mark.parametrize("extra, message", [
    (["--splits", "5-2"], "ends before it starts"),
    (["--set", "svi.steps"], "--set takes METHOD.OPTION=VALUE"),
    (["--set", "nuts.num_samples=5"], "--set names method(s) ['nuts'] that are not in --methods"),
    (["--set", "svi.seed=3"], "--set svi.seed: the cells' seeds come from --seed"),
    (["--splits", "7"], "none of the splits [7]"),
])
def test_bad_arguments_exit_2_with_the_reason(tiny_uci, tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(command(tiny_uci, tmp_path / "run", *extra))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_ray_executor_without_ray_names_the_extra(tiny_uci, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(SystemExit) as exit_info:
        main(command(tiny_uci, tmp_path / "run", "--executor", "ray"))
    assert exit_info.value.code == 2
    assert "--executor ray needs Ray: pip install -e '.[ray]'" in capsys.readouterr().err
