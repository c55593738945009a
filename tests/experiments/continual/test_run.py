from __future__ import annotations

import json
import os
import re

import pytest
import torch
from bnn.datasets.continual import ContinualBenchmark, load_moving_regression, load_split_digits
from bnn.inference import Posterior
from bnn.inference.continual import CONTINUAL_METHODS, ContinualOptions, ContinualSetup
from bnn.models import GaussianPrior, MultiHeadMLP, PosteriorPrior

from bnn.cli.main import main
from bnn.experiments.continual import forgetting, run_continual

TINY = {"hidden": (4,), "steps": 10, "num_samples": 3, "coreset_size": 4}


def small(benchmark: ContinualBenchmark, tasks: int = 2, rows: int = 30) -> ContinualBenchmark:
    """The first ``tasks`` tasks with ``rows`` training rows each: a run of seconds."""
    first = benchmark.first_tasks(tasks)
    kept = tuple(type(task)(task.name, task.x_train[:rows], task.y_train[:rows], task.x_test, task.y_test)
                 for task in first.tasks)
    return ContinualBenchmark(first.name, kept, first.likelihood, first.out_features, first.multi_head)


@pytest.mark.long
def test_every_method_learns_two_tasks_and_a_rerun_resumes(tmp_path):
    benchmark = small(load_split_digits())
    first = run_continual(benchmark, CONTINUAL_METHODS.names(), tmp_path, **TINY)
    for method, scores in first.scores.items():
        assert [len(row) for row in scores] == [1, 2], method
        assert all(0 <= s <= 1 for row in scores for s in row)
    (tmp_path / "vcl" / "task-1" / "metrics.json").unlink()  # as if the run had stopped during task 1
    lines = []
    again = run_continual(benchmark, ["vcl", "finetune"], tmp_path, report=lines.append, **TINY)
    assert lines[0].startswith("vcl: task 0 kept") and lines[1].startswith("vcl: task 1 learnt")
    assert again.scores["vcl"] == first.scores["vcl"] and again.scores["finetune"] == first.scores["finetune"]
    saved = Posterior.load(tmp_path / "vcl" / "task-1" / "posterior")
    assert isinstance(saved.model, MultiHeadMLP)
    prior = saved.model.prior
    assert isinstance(prior["layers.0.weight"], PosteriorPrior) and prior["heads.1.weight"] == GaussianPrior(1.0)
    carry = json.loads((tmp_path / "vcl-coreset" / "task-1" / "carry.json").read_text())
    assert {key: len(rows) for key, rows in carry["coreset"].items()} == {"0": 4, "1": 4}


def test_a_rerun_with_other_options_or_a_bad_method_is_refused_before_any_work(tmp_path):
    benchmark = small(load_split_digits(), tasks=1)
    run_continual(benchmark, ["finetune"], tmp_path, **TINY)
    with pytest.raises(ValueError, match="other settings.*resume it with those"):
        run_continual(benchmark, ["finetune"], tmp_path, **{**TINY, "steps": 11})
    with pytest.raises(ValueError, match="unknown continual method 'ewc'"):
        run_continual(benchmark, ["vcl", "ewc"], tmp_path / "other", **TINY)
    with pytest.raises(ValueError, match="takes no option.*'step'"):
        run_continual(benchmark, ["vcl"], tmp_path / "other", step=3)
    with pytest.raises(ValueError, match="hidden must be a non-empty sequence"):
        ContinualOptions(hidden=())
    assert not (tmp_path / "other").exists()


def test_the_coreset_must_leave_data_to_propagate(tmp_path):
    with pytest.raises(ValueError, match="coreset_size=30 leaves none of the 30"):
        run_continual(small(load_split_digits(), tasks=1), ["vcl-coreset"], tmp_path, **{**TINY, "coreset_size": 30})


def test_regression_is_scored_by_rmse_and_new_heads_get_the_first_prior():
    setup = ContinualSetup(small(load_moving_regression()), ContinualOptions(**TINY))
    assert setup.score(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])) == pytest.approx(2**0.5)
    multi = ContinualSetup(load_split_digits(), ContinualOptions(**TINY))
    carried = PosteriorPrior({s.name: torch.zeros(s.shape) for s in multi.model().sites},
                             {s.name: torch.ones(s.shape) for s in multi.model().sites})
    prior = multi.prior_for(2, carried.config())
    assert set(prior) == {"*", "heads.2", "heads.3", "heads.4"} and prior["*"] == carried


def test_forgetting_and_tables():
    scores = [[0.9], [0.7, 0.8]]
    assert forgetting(scores, "accuracy") == pytest.approx(0.2)
    assert forgetting([[0.1], [0.3, 0.2]], "rmse") == pytest.approx(0.2)
    assert forgetting([[0.9]], "accuracy") is None


@pytest.mark.long
def test_command_line_writes_the_report(tmp_path, capsys):
    main(["continual", "--benchmark", "moving-regression", "--methods", "finetune,online-laplace", "--hidden", "8",
          "--steps", "20", "--num-samples", "5", "--out", str(tmp_path), "--quiet"])
    report = (tmp_path / "report.md").read_text()
    assert "bnn continual --benchmark moving-regression" in report and "| online-laplace |" in report
    assert (tmp_path / "continual.png").stat().st_size > 0
    assert json.loads((tmp_path / "continual.json").read_text())["metric"] == "rmse"
    assert "forgetting" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["continual", "--methods", "vcl,nope", "--out", str(tmp_path / "x"), "--quiet"])
    assert exit_info.value.code == 2 and "unknown continual method 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--methods", "vcl", "--coreset-size", "5"], "--coreset-size applies to vcl-coreset only, which --methods vcl"),
    (["--methods", "vcl,ucl", "--batch-size", "5"], "--batch-size applies to bgd only, which --methods vcl,ucl"),
    (["--methods", "bgd", "--mc-samples", "3"], "mc_samples=3 must be even"),
    (["--init-rho", "1e6"], r"init_rho=1e\+06 starts the guide at sd softplus\(init_rho\) = 1e\+06, wider than the "
                            "prior's scale 1; pass an init_rho below 0.541"),
    (["--init-rho", "nan"], "init_rho"),
])
def test_options_that_would_be_ignored_or_give_nonsense_are_refused_before_any_work(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["continual", "--out", str(tmp_path / "run"), "--quiet", *extra])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("occupant", ["notes.txt", "data/"])
def test_an_out_holding_files_of_something_else_is_refused_and_left_as_it_was(tmp_path, occupant):
    (tmp_path / occupant.rstrip("/")).mkdir() if occupant.endswith("/") else (tmp_path / occupant).write_text("mine")
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(ValueError, match=r"holds files `bnn continual` did not write.*choose another --out"):
        run_continual(small(load_split_digits(), tasks=1), ["finetune"], tmp_path, **TINY)
    assert sorted(path.name for path in tmp_path.iterdir()) == before


@pytest.mark.parametrize("out", ["file", "file/run"])
def test_an_out_that_is_or_lies_under_a_file_is_refused(tmp_path, out):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ValueError, match=r"file is a file, not a folder; choose another --out"):
        run_continual(small(load_split_digits(), tasks=1), ["finetune"], tmp_path / out, **TINY)
    assert (tmp_path / "file").read_text() == "mine"


def test_an_unwritable_out_is_refused_before_any_work(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["continual", "--methods", "finetune", "--out", "/proc/bnn-continual", "--quiet"])
    assert exit_info.value.code == 2 and "cannot write into /proc" in capsys.readouterr().err


def test_a_second_run_of_a_folder_is_refused_while_the_first_writes(tmp_path, monkeypatch):
    benchmark, refused = small(load_split_digits(), tasks=1), []
    finetune = CONTINUAL_METHODS.get("finetune")

    def learns_while_a_second_run_starts(setup, task, carry):
        with pytest.raises(ValueError, match=f"another run \\(process {os.getpid()}\\) is writing into {tmp_path} now"):
            run_continual(benchmark, ["finetune"], tmp_path, **TINY)
        refused.append(task)
        return finetune(setup, task, carry)

    monkeypatch.setitem(CONTINUAL_METHODS._entries, "finetune", learns_while_a_second_run_starts)
    run_continual(benchmark, ["finetune"], tmp_path, **TINY)
    assert refused == [0]
    monkeypatch.undo()
    lines = []
    run_continual(benchmark, ["finetune"], tmp_path, report=lines.append, **TINY)  # the lock ended with the run
    assert lines[0].startswith("finetune: task 0 kept")


@pytest.mark.parametrize("damaged", ["run.json", "finetune/task-0/metrics.json", "finetune/task-0/carry.json"])
def test_a_damaged_file_of_a_run_is_named_with_what_to_do(tmp_path, damaged):
    benchmark = small(load_split_digits(), tasks=1)
    run_continual(benchmark, ["finetune"], tmp_path, **TINY)
    (tmp_path / damaged).write_text("{")
    advice = "choose another --out" if damaged == "run.json" else f"remove {tmp_path / 'finetune' / 'task-0'} to learn"
    with pytest.raises(ValueError, match=f"{tmp_path / damaged} is damaged \\(Expecting property name .*\\); .*{advice}"):
        run_continual(benchmark, ["finetune"], tmp_path, **TINY)


def test_an_interrupted_run_says_which_tasks_it_kept_and_the_rerun_resumes(tmp_path, monkeypatch):
    benchmark = small(load_split_digits(), tasks=2)
    finetune = CONTINUAL_METHODS.get("finetune")

    def stopped_at_the_second_task(setup, task, carry):
        if task == 1:
            raise KeyboardInterrupt("SIGTERM")
        return finetune(setup, task, carry)

    monkeypatch.setitem(CONTINUAL_METHODS._entries, "finetune", stopped_at_the_second_task)
    with pytest.raises(KeyboardInterrupt, match=f"SIGTERM: the 1 finished task\\(s\\) are kept in {tmp_path}; the same "
                                                "command resumes from them"):
        run_continual(benchmark, ["finetune"], tmp_path, **TINY)
    monkeypatch.undo()
    lines = []
    run_continual(benchmark, ["finetune"], tmp_path, report=lines.append, **TINY)
    assert [line.split(",")[0] for line in lines] == ["finetune: task 0 kept", "finetune: task 1 learnt"]
