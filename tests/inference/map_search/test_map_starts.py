"""MAP starts in worker processes (:func:`bnn.inference.map_search.map_starts.run_members`)."""

import warnings

import pytest
import torch
from bnn.inference.map_search import map_starts

from bnn.runtime.recycled_workers import RECYCLED_WORKER
from tests.support.growing_worker import RECYCLE_AT_20_MB, grow

pytestmark = pytest.mark.subprocess


def _growing_member(model, x, y, job):
    """A member's fit that only grows its worker by 50 MB; its result is how many blocks the worker keeps."""
    return grow(50)


def test_a_worker_restarted_for_its_growth_is_no_warning_of_the_members_fit(monkeypatch):
    # a MAP fit on protein grows its worker past loky's 300 MB; loky restarts it and warns of a memory leak, which a
    # UCI cell then recorded among its problems
    monkeypatch.setattr(map_starts, "_fit_member_in_worker", _growing_member)
    monkeypatch.setattr(map_starts, "WORKER_ENV", map_starts.WORKER_ENV | RECYCLE_AT_20_MB)
    # loky takes a worker's reference size after its first job and restarts it after a later one: six jobs on two
    # workers restart at least one, whatever the share each worker gets
    jobs = [map_starts.MemberJob(member=member, seed=member,
                                 map_arguments={"steps": 1, "lr": 0.1, "tolerance": 0.1, "max_iter": None},
                                 dtype=torch.float64) for member in range(6)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcomes = map_starts.run_members(None, torch.zeros(2, 1), torch.zeros(2), jobs, workers=2, progress=False)
    assert not outcomes.failures and outcomes.interrupt is None
    fresh = [member for member, kept in outcomes.fits.items() if kept == 1]  # first job of a worker process
    assert len(fresh) > 2, "no worker was restarted: the test does not exercise the notice"
    assert not [w for w in caught if str(w.message).startswith(RECYCLED_WORKER)]
