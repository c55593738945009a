"""The shared worker helpers of :mod:`bnn.runtime.workers`, and the workers' lives: they end with their parent."""

from __future__ import annotations

import os
from types import SimpleNamespace

import psutil
import pytest
import torch
from bnn.inference.core.method import Method
from bnn.inference.point_estimate import MapOptions, MapRecord
from bnn.models import BayesianMLP

from bnn.runtime.workers import THREAD_VARIABLES, available_cores, one_torch_thread
from tests.support.processes import kill_all, loky_workers, start_bnn, still_running

WORKERS_GONE_SECONDS = 5


def test_one_torch_thread_restores_the_thread_count():
    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def threads_inside_a_fit() -> int:
    """The torch thread count a method's run sees, through :class:`Method` as ``fit`` calls it."""
    seen = []

    def run(model, x, y, options):
        seen.append(torch.get_num_threads())
        return SimpleNamespace(record=SimpleNamespace())  # Method notes the held parameters in the record

    probe = Method("probe", MapOptions, run, MapRecord)
    probe(BayesianMLP(1, hidden=[2]), torch.zeros(4, 1), torch.zeros(4))
    return seen[0]


def test_a_fit_runs_on_one_torch_thread_and_gives_the_count_back(two_threads_by_default):
    assert threads_inside_a_fit() == 1
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("variable", THREAD_VARIABLES)
def test_a_fit_keeps_the_threads_a_user_set_in_the_environment(two_threads_by_default, monkeypatch, variable):
    monkeypatch.setenv(variable, "3")
    assert threads_inside_a_fit() == 2


def test_a_fit_keeps_the_threads_a_user_set_with_torch(two_threads_by_default):
    torch.set_num_threads(3)
    assert threads_inside_a_fit() == 3


def test_available_cores_are_those_this_process_may_run_on():
    assert available_cores() == len(os.sched_getaffinity(0))


NUTS = ["fit", "--dataset", "toy1d", "--hidden", "3", "--quiet", "--method", "nuts", "--num-chains", "2",
        "--num-warmup", "20", "--num-samples", "100000", "--max-tree-depth", "4"]
ENSEMBLE = ["fit", "--dataset", "toy1d", "--hidden", "3", "--quiet", "--method", "ensemble", "--num-members", "2",
            "--member-method", "parallel", "--map-steps", "10000000"]
NUTS_SAMPLING = "bnn.inference.nuts.chains:_ProgressBars.__call__"


@pytest.mark.subprocess
@pytest.mark.skipif(available_cores() < 2, reason="the work runs in processes only with two cores")
@pytest.mark.parametrize("arguments, working", [
    pytest.param(NUTS, None, id="nuts-workers-importing"),
    pytest.param(NUTS, NUTS_SAMPLING, id="nuts-sampling", marks=pytest.mark.slow),  # 45 s: compiles, adapts
    pytest.param(ENSEMBLE, None, id="ensemble-members-importing"),
])
def test_workers_end_within_seconds_of_their_parent_killed_with_sigkill(arguments, working, tmp_path):
    process = start_bnn(*arguments, "--out", str(tmp_path / "run"), announce=working)
    family = []
    try:
        if working is not None:
            assert process.stdout.readline() == "working\n", process.communicate(timeout=60)[1]
        workers = loky_workers(process, 2)
        family = psutil.Process(process.pid).children(recursive=True)  # loky's resource trackers too
        process.kill()
        assert still_running(workers, within=WORKERS_GONE_SECONDS) == []
    finally:
        kill_all(process, family)
