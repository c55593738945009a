"""How worker processes start (:mod:`bnn.runtime.worker_process`): Ctrl-C held until they ignore it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.support.processes import LOKY_WORKER, ROOT, kill_all

pytestmark = pytest.mark.subprocess

FIRST_WORKERS_MASK = """
import json, loky, signal
from bnn.runtime.worker_process import stop_signals_held

def blocked_signals():  # no initializer: the worker's mask is the one it began with
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    mask = int(status["SigBlk"], 16)
    return [signum for signum in (signal.SIGINT, signal.SIGTERM) if mask >> (signum - 1) & 1]

with stop_signals_held():  # in a fresh process: the block itself starts the resource trackers
    executor = loky.ProcessPoolExecutor(max_workers=2)
    futures = [executor.submit(blocked_signals) for _ in range(2)]
print(json.dumps([future.result() for future in futures]))
executor.shutdown(kill_workers=True)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the signal mask from /proc")
def test_workers_started_in_the_block_begin_with_ctrl_c_and_sigterm_blocked():
    # Python 3.11's multiprocessing resource tracker unblocks both signals when it first starts, which a pool does
    # with its first worker: the block must have started it before holding the signals
    run = subprocess.run([sys.executable, "-c", FIRST_WORKERS_MASK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [[signal.SIGINT, signal.SIGTERM]] * 2


KILLED_WORKERS_WITH_A_BAR = """
import os, loky
from bnn.runtime.worker_process import start_worker, stop_signals_held

def draw_a_bar():  # a MAP start in a chain worker makes a (disabled) tqdm bar
    from tqdm import tqdm
    tqdm(range(3), disable=True).close()
    return os.getpid()

with stop_signals_held():
    executor = loky.ProcessPoolExecutor(max_workers=2, initializer=start_worker, initargs=(os.getpid(),))
    print(sorted({executor.submit(draw_a_bar).result() for _ in range(4)}))
executor.shutdown(kill_workers=True)  # what the session's end does to warm chain workers
"""


def semaphores_left_behind(stderr: str) -> list[str]:
    """The semaphores the resource trackers found still there when the session ended, from their warnings: every one
    the standard library's tracker reports, and those loky's reports that its unlink did not find already gone.

    Loky's tracker alone sometimes (1 run in 150 of a plain ``loky.ProcessPoolExecutor`` of 2 workers shut down with
    ``kill_workers=True``, measured) reports one of the pool's own semaphores that the session had unlinked: its
    unregistration was lost, and the tracker's unlink then fails with ``FileNotFoundError``: nothing was left behind.
    """
    left = re.findall(r"There appear to be \d+ leaked semaphore objects", stderr)  # the stdlib's names none
    for reported in re.findall(r"leaked semlock objects to clean up at shutdown: (\{.*?\})", stderr):
        left += [name for name in re.findall(r"'([^']+)'", reported)
                 if f"resource_tracker: {name}: FileNotFoundError" not in stderr]
    return left


def test_the_reading_of_the_trackers_warnings():
    stdlib = ("resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects to "
              "clean up at shutdown")
    loky_gone = ("resource_tracker.py:444: UserWarning: resource_tracker: There appear to be 1 leaked semlock objects to "
                 "clean up at shutdown: {'/loky-4910-zr3czzee': 1}\n  warnings.warn(\nresource_tracker.py:468: "
                 "UserWarning: resource_tracker: /loky-4910-zr3czzee: FileNotFoundError(2, 'No such file or directory')")
    loky_left = loky_gone.replace("/loky-4910-zr3czzee: FileNotFoundError", "/loky-4910-other: FileNotFoundError")
    assert semaphores_left_behind("") == semaphores_left_behind(loky_gone) == []
    assert len(semaphores_left_behind(stdlib)) == 1 and semaphores_left_behind(loky_left) == ["/loky-4910-zr3czzee"]


def test_workers_killed_after_drawing_a_bar_leave_no_semaphore_behind():
    # tqdm's default lock is a cross-process semaphore; a killed worker never unlinks it, and the resource tracker
    # reported it as leaked when the session ended
    run = subprocess.run([sys.executable, "-c", KILLED_WORKERS_WITH_A_BAR], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("[")
    assert semaphores_left_behind(run.stderr) == [], run.stderr


NUTS = [sys.executable, "-m", "bnn", "fit", "--dataset", "toy1d", "--hidden", "3", "--quiet", "--method", "nuts",
        "--num-chains", "2", "--num-warmup", "20", "--num-samples", "2000"]


@pytest.mark.slow  # about 5 s per try
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3, 0.5])
def test_ctrl_c_while_the_chain_workers_start_prints_no_traceback_and_exits_130(delay, tmp_path):
    process = subprocess.Popen([*NUTS, "--out", str(tmp_path / "run")], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    family = []
    try:
        deadline = time.monotonic() + 120
        while not family and time.monotonic() < deadline and process.poll() is None:
            family = [child for child in psutil.Process(process.pid).children()
                      if LOKY_WORKER in " ".join(child.cmdline())]
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        _, errors = process.communicate(timeout=60)
        assert family, "no worker started"
        assert process.returncode == 130 and "Traceback" not in errors and "Fatal" not in errors, errors
    finally:
        kill_all(process, family)
