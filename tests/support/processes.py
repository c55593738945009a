"""Helpers of the tests that start ``bnn`` in a process, signal it and watch its worker processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
LOKY_WORKER = "loky.backend.popen_loky_posix"  # in the command line of every loky worker process


def start_bnn(*arguments: str, announce: str | None = None) -> subprocess.Popen:
    """``bnn ARGUMENTS`` in a new session (its own process group, as a terminal's foreground job), with pipes; with
    ``announce`` (``MODULE:NAME``) it prints ``working`` when that first runs (:mod:`tests.support.announced_run`)."""
    command = ["-m", "bnn"] if announce is None else ["-m", "tests.support.announced_run", announce]
    return subprocess.Popen([sys.executable, *command, *arguments], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def loky_workers(process: subprocess.Popen, count: int, timeout: float = 120) -> list[psutil.Process]:
    """The first ``count`` loky worker processes of ``process``, waiting for them up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        workers = [child for child in psutil.Process(process.pid).children()
                   if LOKY_WORKER in " ".join(_command_line(child))]
        if len(workers) >= count:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"no {count} loky workers within {timeout} s: {process.communicate(timeout=30)[1]}")


def _command_line(child: psutil.Process) -> list[str]:
    try:
        return child.cmdline()
    except psutil.Error:  # gone meanwhile
        return []


def still_running(processes: list[psutil.Process], within: float) -> list[int]:
    """The ids of ``processes`` still running after ``within`` seconds (zombies count as gone)."""
    _, alive = psutil.wait_procs(processes, timeout=within)
    return [p.pid for p in alive if _status(p) != psutil.STATUS_ZOMBIE]


def _status(process: psutil.Process) -> str:
    try:
        return process.status()
    except psutil.Error:
        return psutil.STATUS_ZOMBIE


def kill_all(process: subprocess.Popen, others: list[psutil.Process] = ()) -> None:
    """SIGKILL ``process`` and ``others`` if still there (a failing test leaves no strays), and reap ``process``."""
    for victim in others:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    if process.poll() is None:
        process.kill()
    process.communicate()
