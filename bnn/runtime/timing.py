"""The time of a small piece of work, measured where it will run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

REPEATS = 9


def median_seconds(call: Callable[[], object], repeats: int = REPEATS) -> float:
    """Median wall time of ``repeats`` calls of ``call`` after one untimed call (allocation and dispatch warm up)."""
    call()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)
