"""MNIST-1D (Greydanus 2020), generated offline by the ``mnist1d`` package from its built-in templates."""

from __future__ import annotations

import random

import numpy as np
from bnn.datasets.dataset import Dataset

BENCHMARK_SEED = 42
"""The generator seed of the published MNIST-1D benchmark (``mnist1d.data.get_dataset_args``)."""
LARGE_SIGNALS = 50_000
"""The signals of ``mnist1d-40k`` (:func:`load_mnist1d_40k`): 40,000 for training and 10,000 for testing."""


def load_mnist1d_40k(seed: int = 0) -> Dataset:
    """MNIST-1D at ten times the benchmark's size, ``mnist1d-40k``: 40,000 training and 10,000 test signals drawn by
    the same generator at its standard settings (:func:`load_mnist1d` with ``signals=50_000``), for measuring what a
    fit costs on data that does not fit one batch."""
    return load_mnist1d(seed, signals=LARGE_SIGNALS)


def load_mnist1d(seed: int = 0, *, signals: int | None = None) -> Dataset:
    """MNIST-1D: 4,000 training and 1,000 test signals of length 40, 10 classes, multiclass; ``input_shape`` ``(40,)``.

    Each signal is one of ten 12-point digit templates padded, sheared, scaled, translated, smoothed, given
    correlated and white noise, and resampled to 40 points (Greydanus 2020, "Scaling down deep learning").
    ``mnist1d.data.make_dataset`` generates it with its default arguments (a few seconds; its ``get_dataset``,
    which downloads, is never called). ``seed=0`` gives the published benchmark (generator seed
    :data:`BENCHMARK_SEED`) and its split, the first 80% of the shuffled signals for training; another ``seed``
    generates another draw with the generator seed ``BENCHMARK_SEED + seed``. ``signals`` draws that many signals
    at the same settings instead of the benchmark's 5,000 (the data set is then named ``mnist1d-<train>k``). The
    generator seeds NumPy's and Python's global random states: they are restored afterwards.
    """
    from mnist1d.data import get_dataset_args, make_dataset  # imports matplotlib and scipy: only when asked for

    args = get_dataset_args()
    args.seed = BENCHMARK_SEED + seed
    name = "mnist1d"
    if signals is not None:
        if isinstance(signals, bool) or not isinstance(signals, int) or signals < 10:
            raise ValueError(f"signals must be an integer of at least 10, got {signals!r}")
        args.num_samples = signals
        name = f"mnist1d-{round(signals * args.train_split / 1000)}k"
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    return Dataset.from_arrays(name, "multiclass", data["x"], data["y"], data["x_test"], data["y_test"],
                               input_shape=(args.final_seq_length,))
