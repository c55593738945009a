"""The chain workers wait, warm, between clean NUTS fits of one process, and only then."""

from __future__ import annotations

import threading
import time

import loky.process_executor
import psutil
import pytest
import torch
from bnn.inference import fit
from bnn.inference.nuts import chains, warm_workers

from tests.support.interrupts import interrupt_at_report
from tests.support.processes import LOKY_WORKER, still_running

pytestmark = [
    pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning"),  # short runs
    pytest.mark.skipif(chains.available_cores() < 2, reason="chains run in processes only with two cores"),
    pytest.mark.subprocess,
]


def in_processes(conjugate, seed: int = 5, num_warmup: int = 20, num_samples: int = 20):
    posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=2, chain_method="parallel", max_tree_depth=4, progress=False, engine="nutpie", seed=seed,
                    init="prior")  # a worker in its MAP start sees no stop until the MAP ends
    assert posterior.record.chain_method == "parallel"
    return posterior


def worker_pids() -> set[int]:
    return {child.pid for child in psutil.Process().children() if LOKY_WORKER in " ".join(child.cmdline())}


@pytest.fixture(scope="module", autouse=True)
def new_workers_for_the_module():
    """The module begins with no warm workers and leaves none. Within it a test takes the pool a clean fit before it
    left, if any (its first fit starts one where there is none, so no test needs another to run first): a worker takes
    seconds to start, and only the tests of new workers (and of their end) start more. The order below keeps a warm
    pool for the tests that can use one."""
    warm_workers.close_chain_workers()
    yield
    warm_workers.close_chain_workers()


@pytest.fixture
def no_warm_workers():
    """No warm workers before the test, none after it: for a test whose pool must be started under its own settings."""
    warm_workers.close_chain_workers()
    yield
    warm_workers.close_chain_workers()


def test_a_clean_fit_leaves_its_workers_for_the_next_which_gives_the_draws_fresh_workers_give(conjugate):
    in_processes(conjugate, seed=6)
    workers = worker_pids()
    assert len(workers) == 2
    warm = in_processes(conjugate, seed=5)
    assert worker_pids() == workers  # the same processes ran the second fit
    warm_workers.close_chain_workers()
    assert worker_pids() == set()
    fresh = in_processes(conjugate, seed=5)
    for site, draws in fresh.samples.items():
        assert torch.equal(warm.samples[site], draws), site


def workers_seen_during(run) -> set[int]:
    """The chain workers alive at any moment of ``run()``, polled every 20 ms (a worker lives seconds: it imports
    torch), so one whose chain ended, and whose idle time ran out, before the fit returned is counted too."""
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            seen.update(worker_pids())
            done.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run()
    finally:
        done.set()
        watcher.join()
    return seen


IDLE_EXIT_BOUND = 300
"""Seconds a test waits for an idle worker to end: an event wait (it returns when they end), bounded far beyond any
load, so a busy machine makes the test slower, never red."""


def test_idle_workers_are_killed_at_exit_before_loky_waits_for_them(conjugate):
    in_processes(conjugate)
    hooks = [getattr(hook, "func", hook) for hook in threading._threading_atexits]  # noqa: SLF001
    # threading runs its exit hooks last registered first: ours must come after loky's, which waits for workers
    assert hooks.index(warm_workers.close_chain_workers) > hooks.index(loky.process_executor._python_exit)


def test_a_warm_worker_killed_while_it_waits_is_replaced(conjugate):
    in_processes(conjugate)
    victim = psutil.Process(min(worker_pids()))
    victim.kill()
    victim.wait(5)
    time.sleep(0.5)  # loky's manager thread notices the dead worker and marks the pool broken
    posterior = in_processes(conjugate)
    assert posterior.num_draws == 20 and victim.pid not in worker_pids()


def test_an_interrupted_fit_kills_its_workers(conjugate, monkeypatch):
    in_processes(conjugate)
    workers = [psutil.Process(pid) for pid in worker_pids()]
    # at a chain's first warmup report, long before any draw: the fit keeps nothing and raises (interrupted at a
    # chain's first draw, the chain sometimes had no draw to give by the time it stopped, and the KeyboardInterrupt
    # that a test expecting kept draws let through ended the whole pytest session; at 20,000 warmup iterations the
    # chains of this 3-weight model finished before their first report reached this process on a faster machine)
    interrupt_at_report(monkeypatch, 1, stage="Warmup")
    with pytest.raises(KeyboardInterrupt):
        in_processes(conjugate, num_warmup=2_000_000)
    assert warm_workers._warm is None and still_running(workers, within=5) == [] and worker_pids() == set()


@pytest.mark.usefixtures("no_warm_workers")  # its pool starts with the idle time set here
def test_idle_workers_end_after_the_idle_time_and_the_next_fit_starts_new_ones(conjugate, monkeypatch):
    monkeypatch.setattr(warm_workers, "IDLE_SECONDS", 1)
    seen = workers_seen_during(lambda: in_processes(conjugate))
    assert len(seen) == 2
    idle = [psutil.Process(pid) for pid in seen if psutil.pid_exists(pid)]
    assert still_running(idle, within=IDLE_EXIT_BOUND) == []  # they end by themselves: nothing here stops them
    assert in_processes(conjugate).num_draws == 20 and not worker_pids() & seen
