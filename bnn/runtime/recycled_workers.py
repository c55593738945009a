"""loky's notice that it restarted a worker that grew, ignored around the collection's own process pools.

loky ends a worker whose memory has grown by 300 MB (``LOKY_MAX_MEMORY_LEAK_SIZE``) since the end of its first
task once a later task is done, starts another in its place, and warns "A worker was restarted while some jobs were given to the
executor ... which usually indicates a memory leak". A UCI cell of a large data set, or a MAP fit on one, grows that
much with no leak (its data, its Jacobians, memory the allocator keeps): the restart loses nothing and the user can do
nothing about it. :func:`recycled_worker_notice_ignored` ignores that one warning, by its message and category; every
other warning, loky's notice of a worker that *died* included, still shows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

RECYCLED_WORKER = "A worker was restarted while some jobs were given to the executor"


@contextmanager
def recycled_worker_notice_ignored() -> Iterator[None]:
    """Run the block with loky's restart notice (:data:`RECYCLED_WORKER`) ignored.

    The filters are global, so the block holds in loky's own thread, which warns; it must span the pool's life.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=RECYCLED_WORKER, category=UserWarning)
        yield
