"""Seeded, isolated random state: a fit neither reads nor disturbs the caller's RNGs."""

from __future__ import annotations

import numbers
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyro
import torch


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch, numpy and Python RNGs seeded by ``seed``, then restore them."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        pyro.set_rng_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)
