"""Training data as PyTorch users hold it: a :class:`torch.utils.data.DataLoader`, or any iterable of ``(x, y)``
batches whose ``dataset`` has a length, as laplace-torch's ``fit(train_loader)`` takes it.

A method that works on minibatches takes a loader: :func:`read_loader` reads it once, in its order, into the training
tensors every method fits, and the loader's batch size sets the method's batch options (:data:`BATCH_OPTIONS`) that
the caller left out, so that a loader and its tensors with the same batch size give the same posterior for the same
seed. The method draws its own batches from those rows, with its seed, as it does from tensors: a loader that
shuffles hands over the same rows in another order, whose batches differ, so its fit agrees with the tensors' within
Monte Carlo error. A method with no batch option computes on every row at each step (NUTS: each leapfrog step's
gradient is the whole data's) and refuses a loader before any work.

The data are read into memory: the dataset's length and the first batch's rows give their size, checked against the
memory available before the rest is read (:func:`~bnn.runtime.memory.check_memory`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from bnn.runtime.memory import check_memory, value_bytes

BATCH_OPTIONS = ("batch_size", "map_batch_size")
"""The options a loader's batch size sets: the rows per step of a method's minibatch loop and of its MAP fit."""


def is_loader(data) -> bool:
    """Whether ``data`` is a loader: an iterable with a ``dataset``, as a :class:`~torch.utils.data.DataLoader` is."""
    return isinstance(data, Iterable) and hasattr(data, "dataset")


def batch_options(method) -> list[str]:
    """``method``'s batch options (:data:`BATCH_OPTIONS`, those its option set has).

    Raises
    ------
    ValueError
        For a method with none: it computes on every row at each step and takes no loader.
    """
    fields = {field.name for field in dataclasses.fields(method.options)}
    names = [name for name in BATCH_OPTIONS if name in fields]
    if not names:
        raise ValueError(f"method {method.name!r} computes on every training row at each step, not on minibatches: it "
                         "takes the data as tensors, not a loader; pass (x, y) (the loader's dataset's tensors) or a "
                         "Dataset")
    return names


def with_loader_batches(names: list[str], options: Mapping[str, Any], batch_rows: int) -> dict[str, Any]:
    """``options`` with each batch option of ``names`` (:func:`batch_options`) the caller left out set to the loader's
    ``batch_rows``.

    Raises
    ------
    ValueError
        For a batch option set to another size than the loader's.
    """
    for name in names:
        if options.get(name) is not None and options[name] != batch_rows:
            raise ValueError(f"{name}={options[name]} and a loader of batches of {batch_rows} rows: the loader's batches "
                             f"set {name}; leave {name} out, or build the loader with batch_size={options[name]}")
    return {**options, **{name: batch_rows for name in names}}


def _batch_pair(batch, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``index`` as ``(x, y)`` tensors of rows, or the error that says what it is instead."""
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2 and all(isinstance(part, torch.Tensor) for part in batch)):
        raise ValueError(f"batch {index} of the loader is a {type(batch).__name__}, not a pair (x, y) of tensors; give a "
                         "dataset whose items are (input, target) pairs, such as a TensorDataset(x, y)")
    x, y = batch
    if x.dim() > 2:
        raise ValueError(f"batch {index} of the loader has inputs of shape {tuple(x.shape)}: the networks read rows of "
                         "(n, features); flatten them in the dataset (TensorDataset(x.flatten(1), y)) and, in a module of "
                         "your own, unflatten them in its forward (nn.Unflatten)")
    return x, y


def read_loader(loader, method: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The rows of ``loader``, read once in its order for a fit by ``method``, and its batch size.

    Returns
    -------
    x, y : torch.Tensor
        Every batch's inputs and targets, concatenated (checked for the model by the caller).
    batch_rows : int
        ``loader.batch_size``, or the first batch's rows for a loader without one (a batch sampler).

    Raises
    ------
    ValueError
        For a dataset without a length (an iterable dataset), an empty loader, a batch that is not a pair of tensors of
        rows, or data larger than the memory available (checked from the first batch, before the rest is read).
    """
    try:
        rows = len(loader.dataset)
    except TypeError:
        raise ValueError(f"the loader's dataset ({type(loader.dataset).__name__}) has no length: the fit reads the loader "
                         "into memory and checks its size first; give a map-style dataset (a TensorDataset) or the "
                         "tensors (x, y)") from None
    batches = iter(loader)
    first = next(batches, None)
    if first is None:
        raise ValueError("the loader yields no batch: there are no training rows to fit")
    x, y = _batch_pair(first, 0)
    row_values = math.prod(x.shape[1:]) + math.prod(y.shape[1:])
    check_memory(method, {"the loader's rows, read and joined": value_bytes(2 * rows * row_values, torch.float64)})
    xs, ys = [x], [y]
    for index, batch in enumerate(batches, start=1):
        x, y = _batch_pair(batch, index)
        xs.append(x)
        ys.append(y)
    batch_rows = loader.batch_size if isinstance(getattr(loader, "batch_size", None), int) else len(xs[0])
    return torch.cat(xs), torch.cat(ys), batch_rows

