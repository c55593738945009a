"""The Ray executor on a real local Ray cluster of 2 CPUs (started once for the module)."""

import os
import signal
import sys

import pytest
from bnn.datasets.uci import read_uci_table
from bnn.inference.nuts import UCI_CHAINS

from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import run_cell
from bnn.experiments.uci.ray_cluster import cores_needed, run_ray
from bnn.experiments.uci.run import run_uci
from tests.support.uci import FAST_SVI

pytestmark = pytest.mark.subprocess

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test's tasks travel by value
    yield
    ray.shutdown()


def test_a_tiny_grid_on_ray_equals_the_local_executor(cluster, tiny_uci, tmp_path):
    on_ray = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], tmp_path / "ray", executor="ray", overrides=FAST_SVI,
                     progress=False)
    # the local executor's numbers do not depend on its worker count (run_cell computes on one torch thread in any
    # process); one worker starts one process importing torch, not two side by side
    local = run_uci(tiny_uci, "tiny", ["svi"], [0, 1], tmp_path / "local", workers=1, overrides=FAST_SVI, progress=False)
    assert list(on_ray["status"]) == ["ok", "ok"]
    assert on_ray[["split", "rmse", "test_ll"]].values.tolist() == local[["split", "rmse", "test_ll"]].values.tolist()
    assert ray.is_initialized()  # a cluster the caller started is left running


# before the test below kills workers: its retries run on the workers the grid started (each imported torch)
def test_a_cell_that_raises_is_reported_with_its_error(cluster, tiny_uci):
    tables = {"tiny": read_uci_table(tiny_uci, "tiny", [0])}
    cell = Cell("tiny", "svi", 0, 10, {"steps": 0})  # refused by SVI's options when the task runs
    [result] = run_ray(tables, [cell], workers=2, max_retries=1, task=run_cell)
    assert result["status"] == "failed" and result["attempts"] == 2
    assert "steps" in result["problems"]


def killing_its_worker_the_first_time(marker):
    def task(table, cell):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "status": "ok", "worker": os.getpid()}
    return task


def test_a_task_whose_worker_is_killed_is_retried_then_reported_failed_when_retries_run_out(cluster, tiny_uci, tmp_path):
    tables = {"tiny": read_uci_table(tiny_uci, "tiny", [0])}
    cell = Cell("tiny", "svi", 0, 10, {})
    task = killing_its_worker_the_first_time(str(tmp_path / "killed-once"))
    [result] = run_ray(tables, [cell], workers=2, max_retries=1, task=task)
    assert result["status"] == "ok" and (tmp_path / "killed-once").exists()
    task = killing_its_worker_the_first_time(str(tmp_path / "killed-again"))
    [result] = run_ray(tables, [cell], workers=2, max_retries=0, task=task)
    assert result["status"] == "failed" and result["attempts"] == 1
    assert "WorkerCrashedError" in result["problems"] or "died" in result["problems"]


def test_a_nuts_cell_asks_for_a_core_per_chain():
    assert cores_needed(Cell("d", "nuts", 0, 50, {"num_chains": 3})) == 3
    assert cores_needed(Cell("d", "nuts", 0, 50, {})) == UCI_CHAINS == 4
    assert cores_needed(Cell("d", "laplace", 0, 50, {})) == 1
