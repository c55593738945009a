"""The ``bnn`` command under Ctrl-C and SIGTERM: status 130 and one line saying what was kept, never a traceback,
whether the signal comes while it imports, while its workers import, or in the middle of a fit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from bnn.console import INTERRUPTED
from tests.support.announced_run import STACKS_SIGNAL
from tests.support.processes import ROOT, kill_all, loky_workers, start_bnn

pytestmark = pytest.mark.subprocess

FIT = ["fit", "--dataset", "toy1d", "--hidden", "3", "--quiet"]
# per method: its options (long enough never to finish), where its work starts, and what the last line says was kept
INTERRUPTED_FITS = {
    "svi": (["--method", "svi", "--steps", "1000000"], "bnn.inference.svi.loop:guarded_step",
            r"interrupted: SVI stopped by {signal} after step \d+ of 1000000; .* --resume .*checkpoint"),
    # --init prior: a worker in its chain's MAP start (init="map", the default) does not see the stop until the MAP
    # ends, outlives the grace period and is killed, and loky's resource tracker then warns after the last line
    "nuts": (["--method", "nuts", "--num-warmup", "20", "--num-samples", "100000", "--max-tree-depth", "4", "--init", "prior"],
             "bnn.inference.nuts.chains:_ProgressBars.__call__",
             r"interrupted(: nuts interrupted \(KeyboardInterrupt(: SIGTERM)?\); kept chains .* marked incomplete in "
             r"metrics.json| by SIGTERM: nothing was kept; .*| ?: nothing was kept; .*)"),
    "laplace": (["--method", "laplace", "--map-steps", "10000000"], "bnn.inference.map_search.polish:log_likelihood",
                r"interrupted( by SIGTERM)?: nothing was kept; .* is as it was before the command"),
}


def interrupt(process, signum: int) -> tuple[str, str]:
    """Send ``signum`` to the process group of ``process`` (a terminal's Ctrl-C reaches every process of the
    foreground job: the workers too) and return its output; a process still there after two minutes fails the test
    with its threads' stacks (:data:`~tests.support.announced_run.STACKS_SIGNAL`)."""
    os.killpg(process.pid, signum)
    try:
        return process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.send_signal(STACKS_SIGNAL)
        time.sleep(2)
        os.killpg(process.pid, signal.SIGKILL)  # its workers too: they hold the pipes
        stderr = process.communicate(timeout=30)[1]
        raise AssertionError(f"still running two minutes after {signal.Signals(signum).name}; its stderr:\n{stderr}") from None


# make test keeps one signal per method (both signals reach the same handler; the slow tier runs the other)
DEFAULT_SIGNAL = {"nuts": signal.SIGTERM, "svi": signal.SIGINT, "laplace": signal.SIGINT}


@pytest.mark.parametrize("method, signum", [
    pytest.param(method, signum, id=f"{method}-{signum.name}",
                 marks=() if DEFAULT_SIGNAL.get(method) == signum else pytest.mark.slow)
    for method in INTERRUPTED_FITS for signum in (signal.SIGINT, signal.SIGTERM)])
def test_an_interrupted_fit_exits_130_with_one_line_saying_what_was_kept(method, signum, tmp_path):
    options, working, kept = INTERRUPTED_FITS[method]
    process = start_bnn(*FIT, *options, "--out", str(tmp_path / "run"), announce=working)
    try:
        assert process.stdout.readline() == "working\n", process.communicate(timeout=60)[1]
        stdout, stderr = interrupt(process, signum)
    finally:
        kill_all(process)
    assert process.returncode == INTERRUPTED, stderr
    assert "Traceback" not in stderr
    last = stderr.rstrip("\n").split("\n")[-1]
    assert re.fullmatch(kept.format(signal=signal.Signals(signum).name), last), last


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_imports_exits_130_quietly(signum, tmp_path):
    process = start_bnn(*FIT, "--out", str(tmp_path / "run"))
    try:
        # the interpreter is up and bnn.console has put in its handlers; the command line's imports take seconds
        # more. The line asserted below is the imports' handler's own: a signal after them prints the fit's line
        time.sleep(0.5)
        stdout, stderr = interrupt(process, signum)
    finally:
        kill_all(process)
    assert (process.returncode, stderr, stdout) == (INTERRUPTED, "interrupted while starting: nothing was done\n", "")


# ``bnn`` whose import of the command line meets a library that catches the KeyboardInterrupt of a SIGTERM (every
# exception, as some do) and goes on: the imports would finish and the fit run
SWALLOWING_ENTRY = """
import builtins, os, signal, sys, time
from bnn.console import main
real_import = builtins.__import__

def importing(name, *arguments, **keywords):
    if name == "bnn.cli.main":
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except BaseException:
            pass
    return real_import(name, *arguments, **keywords)

builtins.__import__ = importing
sys.argv = ["bnn", *sys.argv[1:]]
sys.exit(main())
"""


def test_a_signal_during_the_imports_exits_130_even_when_a_library_swallows_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", SWALLOWING_ENTRY, *FIT, "--out", str(tmp_path / "run")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stderr, done.stdout) == (INTERRUPTED, "interrupted while starting: nothing was done\n", "")
    assert not (tmp_path / "run").exists()


def test_a_second_sigterm_while_bnn_uci_stops_still_exits_130_with_its_line(tiny_uci, tmp_path):
    # a scheduler repeats its SIGTERM: the second lands while the grid ends its cells and writes what it kept
    process = start_bnn("uci", "--uci-dir", str(tiny_uci), "--datasets", "tiny", "--methods", "svi", "--splits", "0-1",
                        "--set", "svi.steps=1000000", "--workers", "2", "--quiet", "--out", str(tmp_path / "run"),
                        announce="bnn.experiments.uci.run:run_cells")
    try:
        assert process.stdout.readline() == "working\n", process.communicate(timeout=60)[1]
        loky_workers(process, 2)
        os.killpg(process.pid, signal.SIGTERM)
        time.sleep(0.3)
        stdout, stderr = interrupt(process, signal.SIGTERM)
    finally:
        kill_all(process)
    assert process.returncode == INTERRUPTED, stderr
    assert "Traceback" not in stderr
    assert stderr.rstrip("\n").split("\n")[-1] == (f"interrupted: SIGTERM: the 0 finished cells are kept in {tmp_path / 'run'}"
                                                   "; the same command runs the rest")
