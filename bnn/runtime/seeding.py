"""Seeded, isolated random state: a fit neither reads nor disturbs the caller's RNGs."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyro
import torch

from bnn.options import seed as parse_seed


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch, numpy and Python RNGs seeded by ``seed`` (checked by :func:`bnn.options.seed`), then
    restore them."""
    parse_seed("seed", seed)
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        pyro.set_rng_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)
