"""loky's restart notice is ignored inside :func:`recycled_worker_notice_ignored` and shown outside it."""

import warnings

import loky
import pytest

from bnn.runtime.recycled_workers import RECYCLED_WORKER, recycled_worker_notice_ignored
from tests.support.growing_worker import RECYCLE_AT_20_MB, grow

pytestmark = pytest.mark.subprocess


def _warnings_of_a_recycled_worker(quiet: bool) -> list[str]:
    """Run three tasks that grow a worker by 50 MB each in a pool that restarts a worker grown by 20 MB; the
    messages of the warnings raised meanwhile."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with recycled_worker_notice_ignored() if quiet else warnings.catch_warnings():
            pool = loky.ProcessPoolExecutor(max_workers=1, env=RECYCLE_AT_20_MB)
            try:
                kept = [future.result() for future in [pool.submit(grow, 50) for _ in range(3)]]
            finally:
                pool.shutdown(wait=True, kill_workers=True)
            warnings.warn("another warning", stacklevel=1)
    assert kept[-1] < 3, "no worker was restarted: the test does not exercise the notice"
    return [str(warning.message) for warning in caught]


def test_the_notice_shows_without_the_filter():
    assert any(message.startswith(RECYCLED_WORKER) for message in _warnings_of_a_recycled_worker(quiet=False))


def test_the_notice_is_ignored_and_other_warnings_still_show():
    messages = _warnings_of_a_recycled_worker(quiet=True)
    assert not any(message.startswith(RECYCLED_WORKER) for message in messages)
    assert "another warning" in messages
