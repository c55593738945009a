"""A loky worker that grows: what makes loky restart it (and warn that it did), for the tests of that notice."""

from __future__ import annotations

import time

RECYCLE_AT_20_MB = {"LOKY_MAX_MEMORY_LEAK_SIZE": "2e7"}
"""A worker environment under which loky restarts a worker grown by 20 MB (300 MB by default)."""

_kept: list[bytearray] = []


def grow(megabytes: int) -> int:
    """Keep ``megabytes`` of fresh memory in this process, then wait past loky's 1 s between memory checks; the
    number of blocks this process keeps (fewer than the calls when loky restarted it)."""
    _kept.append(bytearray(b"\1" * (megabytes * 1_000_000)))
    time.sleep(1.2)
    return len(_kept)
