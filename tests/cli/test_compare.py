"""``bnn compare`` under a time limit: finished fits survive SIGTERM and Ctrl-C, and the same command reuses them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest

from bnn.cli.main import main
from bnn.experiments.comparison import report
from bnn.experiments.comparison import run as workflow
from bnn.runtime.atomic import writing, writing_lock
from tests.support.interrupts import interrupt_fit_of

COMMAND = ["compare", "--dataset", "toy1d", "--methods", "svi,laplace", "--hidden", "3", "--steps", "30", "--map-steps", "30",
           "--num-samples", "20", "--quiet"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``bnn`` with ``argv``."""
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sigterm_at(monkeypatch, module, name: str) -> None:
    """Send this process SIGTERM when ``module.name`` is first called (the real signal, through its handler)."""
    original = getattr(module, name)
    calls = []

    def signalled(*args, **kwargs):
        if not calls:
            calls.append(1)
            signal.raise_signal(signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, signalled)


def sigterm_when_fitting(monkeypatch, method: str) -> None:
    """SIGTERM as ``compare`` starts its ``method`` fit."""
    original = workflow.fit

    def fit(model, data, chosen, **options):
        if chosen == method:
            signal.raise_signal(signal.SIGTERM)
        return original(model, data, chosen, **options)

    monkeypatch.setattr(workflow, "fit", fit)


def interrupt_and_rerun(tmp_path, monkeypatch, capsys):
    """Compare stopped by SIGTERM as its second fit starts, then the same command again; return its report folder."""
    out = tmp_path / "report"
    sigterm_when_fitting(monkeypatch, "laplace")
    code, _, err = run([*COMMAND, "--out", str(out)], capsys)
    monkeypatch.undo()
    kept = tmp_path / "report.partial-fits"
    assert code == 130 and err.startswith("interrupted: compare stopped (SIGTERM); the finished fits 01-svi are kept in ")
    assert err.rstrip().endswith(f"run the same command again to reuse them: bnn {shlex.join([*COMMAND, '--out', str(out)])}")
    assert not out.exists()
    code, printed, _ = run([*COMMAND, "--out", str(out)], capsys)
    assert code == 0 and "reusing the finished svi fit of an earlier run of this command" in printed
    assert "reusing the finished laplace" not in printed and not kept.exists()  # kept fits go once the report is written
    return out


@pytest.mark.long
def test_sigterm_keeps_the_finished_fits_and_the_same_command_reuses_them(tmp_path, monkeypatch, capsys):
    interrupt_and_rerun(tmp_path, monkeypatch, capsys)


@pytest.mark.slow
def test_a_report_with_a_reused_fit_equals_a_fresh_one(tmp_path, monkeypatch, capsys):
    reference = tmp_path / "reference"
    assert run([*COMMAND, "--out", str(reference)], capsys)[0] == 0
    out = interrupt_and_rerun(tmp_path, monkeypatch, capsys)
    table, expected = (pd.read_csv(path / "comparison.csv", index_col=0).drop(columns="fit_seconds") for path in (out, reference))
    pd.testing.assert_frame_equal(table, expected)  # the reused fit gives the same report as a fresh one


@pytest.mark.long
@pytest.mark.parametrize("change", [["--seed", "1"], pytest.param(["--steps", "31"], marks=pytest.mark.slow),
                                    pytest.param(["--hidden", "4"], marks=pytest.mark.slow),
                                    ["--methods", "svi:meanfield,laplace"]])  # make test: a seed and a method changed
def test_another_command_never_reuses_the_kept_fits(tmp_path, monkeypatch, capsys, change):
    out = tmp_path / "report"
    sigterm_when_fitting(monkeypatch, "laplace")
    assert run([*COMMAND, "--out", str(out)], capsys)[0] == 130
    monkeypatch.setattr(workflow, "fit", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt("stop here")))
    code, printed, err = run([*COMMAND, *change, "--out", str(out)], capsys)
    assert code == 130 and "reusing" not in printed and "before any fit finished; nothing was kept" in err
    assert len(list((tmp_path / "report.partial-fits").iterdir())) == 1  # the first command's fits are still there


@pytest.mark.long
def test_sigterm_while_writing_the_report_says_what_was_kept(tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    sigterm_at(monkeypatch, report, "plot_forest")
    code, _, err = run([*COMMAND, "--out", str(out)], capsys)
    assert code == 130 and "compare stopped (SIGTERM while writing the report); the finished fits 01-svi, 02-laplace" in err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["report.partial-fits"]  # no staging folder left


@pytest.mark.long
def test_ctrl_c_during_a_fit_keeps_the_fits_before_it(tmp_path, monkeypatch, capsys):
    interrupt_fit_of(monkeypatch, workflow, "laplace")
    code, _, err = run([*COMMAND, "--out", str(tmp_path / "report")], capsys)
    assert code == 130 and "compare stopped (SIGINT); the finished fits 01-svi are kept" in err


def test_an_interrupted_chain_fit_ends_compare_and_is_not_kept_as_finished(tmp_path, monkeypatch, capsys):
    original = workflow.fit
    stopped = SimpleNamespace(record=SimpleNamespace(interrupted="interrupted (SIGTERM) after 12 draws"))
    monkeypatch.setattr(workflow, "fit", lambda model, data, method, **options: stopped if method == "laplace"
                        else original(model, data, method, **options))
    code, _, err = run([*COMMAND, "--out", str(tmp_path / "report")], capsys)
    assert code == 130 and "compare stopped (laplace: interrupted (SIGTERM) after 12 draws); the finished fits 01-svi are" in err
    kept = next((tmp_path / "report.partial-fits").iterdir())
    assert sorted(p.name for p in kept.iterdir()) == ["01-svi", "fingerprint.json"]


@pytest.mark.parametrize("out", ["/proc/bnn-report", "/sys/bnn/report"])
def test_an_unwritable_out_is_refused_before_any_fit(out, monkeypatch, capsys):
    monkeypatch.setattr(workflow, "fit", lambda *args, **kwargs: pytest.fail("a fit started"))
    code, _, err = run([*COMMAND, "--out", out], capsys)
    assert code == 2 and "error: cannot write into /" in err


def test_a_reference_of_no_chosen_method_is_refused_before_any_fit(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workflow, "fit", lambda *args, **kwargs: pytest.fail("a fit started"))
    code, _, err = run([*COMMAND, "--reference", "nuts", "--out", str(tmp_path / "report")], capsys)
    assert code == 2 and "error: --reference 'nuts' names no fit of this comparison (svi, laplace)" in err


def test_the_report_may_not_go_into_the_uci_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "uci" / "yacht").mkdir(parents=True)
    monkeypatch.setattr(workflow, "fit", lambda *args, **kwargs: pytest.fail("a fit started"))
    code, _, err = run([*COMMAND, "--uci-dir", str(tmp_path / "uci"), "--dataset", "yacht", "--overwrite", "--out",
                        str(tmp_path / "uci" / "report")], capsys)
    assert code == 2 and "lies inside the --uci-dir folder" in err


@pytest.mark.slow  # a process of its own: 20-70 s on a shared machine; the tests above send the same signal in-process
def test_a_terminated_compare_process_exits_130_and_its_log_is_plain_lines(tmp_path):
    out = tmp_path / "report"
    argv = [sys.executable, "-m", "bnn", *[a for a in COMMAND if a != "--quiet"], "--methods", "laplace,svi", "--steps",
            "100000", "--out", str(out)]
    log = tmp_path / "log.txt"
    with log.open("w") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, "BNN_PROGRESS": "on"})
        deadline = time.monotonic() + 120
        while not (tmp_path / "report.partial-fits").exists() or "SVI (meanfield): 0/" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130
    text = log.read_text()
    assert "\r" not in text and "\x1b" not in text
    assert "interrupted: compare stopped (SIGTERM); the finished fits 01-laplace are kept in" in text
    assert not out.exists()


def timed_main_job(out, monkeypatch, capsys) -> dict[str, float]:
    """The main job (``compare`` at its defaults on toy1d, seed 0) into ``out``, its every fit checked as passing its
    own check: each stage's wall time over its estimate (the fits' and the report's, as ``compare`` printed them)."""
    fits, seconds, estimates = {}, {}, {}
    original_fit, original_choose, original_write = workflow.fit, workflow.choose_fits, workflow.write_comparison

    def timed(model, data, method, **options):
        began = time.perf_counter()
        fits[method] = original_fit(model, data, method, **options)
        seconds[method] = time.perf_counter() - began
        return fits[method]

    def chosen(*arguments):
        run = original_choose(*arguments)
        estimates.update((choice.method, choice.estimate) for choice in run.fits)
        estimates["report"] = run.report
        return run

    def written(*arguments, **keywords):
        began = time.perf_counter()
        table = original_write(*arguments, **keywords)
        seconds["report"] = time.perf_counter() - began
        return table

    with monkeypatch.context() as patch:
        patch.setattr(workflow, "fit", timed)
        patch.setattr(workflow, "choose_fits", chosen)
        patch.setattr(workflow, "write_comparison", written)
        code, printed, err = run(["compare", "--dataset", "toy1d", "--methods", "svi,nuts,laplace", "--quiet", "--out",
                                  str(out)], capsys)
    assert code == 0, err
    assert sorted(fits) == ["laplace", "nuts", "svi"]
    assert all(fit.record.converged for fit in fits.values()), {m: fit.record.problems() for m, fit in fits.items()}
    assert fits["nuts"].record.diagnostics.converged, fits["nuts"].record.diagnostics
    assert "did not converge" not in printed + err
    return {stage: seconds[stage] / estimates[stage].seconds for stage in [*fits, "report"]}


TIMING_BAND = (0.5, 2.0)
"""Each stage's wall time over its estimate (issue: estimates within 2x)."""


@pytest.mark.long
@pytest.mark.subprocess
@pytest.mark.serial  # it times each fit against its estimate: tests running beside it would skew the ratio
def test_the_main_job_passes_its_own_checks_and_takes_its_estimated_time(tmp_path, monkeypatch, capsys):
    # `make demo` as it runs there (the model, data and options compare builds by default, seed 0): the defaults were
    # chosen so that every method passes its own check on every seed measured (benchmarks/results/nuts_defaults.md); a
    # change that breaks that fails here, not silently in the demo's report. Each fit's cost estimate, and the report's,
    # printed before the fits, is within 2x of its wall time, both taken here on the same machine. The estimate's units
    # are timed in windows of a fraction of a second at the start, and on this shared machine two runs of the same
    # command timed them up to 1.9x apart while their fits took the same time (benchmarks/results/estimates.md): a
    # job whose ratios leave the band is run once more, and that run must keep every ratio in it
    low, high = TIMING_BAND
    ratios = timed_main_job(tmp_path / "demo", monkeypatch, capsys)
    if not all(low <= ratio <= high for ratio in ratios.values()):
        again = timed_main_job(tmp_path / "again", monkeypatch, capsys)
        assert all(low <= ratio <= high for ratio in again.values()), {"first run": ratios, "second run": again}


def test_compare_is_refused_before_any_fit_while_another_process_writes_its_out(tmp_path, monkeypatch, capsys):
    out, holding, release = tmp_path / "report", threading.Event(), threading.Event()

    def other_writer() -> None:  # another thread takes another lock file descriptor, as another process would
        with writing(out, writer="bnn fit", command=f"bnn fit --method ensemble --out {out}"):
            holding.set()
            assert release.wait(60)

    monkeypatch.setattr(workflow, "fit", lambda *args, **kwargs: pytest.fail("a fit started"))
    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        assert holding.wait(60)
        code, _, err = run([*COMMAND, "--overwrite", "--out", str(out)], capsys)
    finally:
        release.set()
        thread.join()
    assert code == 2 and f"error: {out} is being written by pid {os.getpid()} (`bnn fit --method ensemble --out {out}`" in err
    assert "wait for it, or choose another --out" in err and list(tmp_path.iterdir()) == []


@pytest.mark.long
def test_compare_holds_its_out_from_its_first_fit_to_its_report(tmp_path, monkeypatch, capsys):
    out, locks = tmp_path / "report", []
    original = workflow.fit

    def fit(*args, **kwargs):
        locks.append(json.loads(writing_lock(out).read_text()))
        return original(*args, **kwargs)

    monkeypatch.setattr(workflow, "fit", fit)
    code, _, _ = run([*COMMAND, "--out", str(out)], capsys)
    assert code == 0 and len(locks) == 2 and (out / "report.md").is_file()
    assert all(lock["pid"] == os.getpid() and lock["command"] == f"bnn {shlex.join([*COMMAND, '--out', str(out)])}"
               for lock in locks)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # the lock file went with the run
