"""A DataLoader as the data of ``fit``: every method with a batch option gives the posterior of the loader's tensors at
the loader's batch size and the same seed; a method without one, a dataset without a length, batches that are not pairs
of rows, a batch option that contradicts the loader and data larger than the memory are refused, saying why."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import METHODS, fit
from bnn.inference.core.loader_data import BATCH_OPTIONS, read_loader
from bnn.models import BayesianMLP
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from bnn.runtime import memory
from tests.support.quick_options import QUICK, SECONDS

ROWS, BATCH = 40, 16


@pytest.fixture(scope="module")
def rows():
    data = load_toy1d()
    return data.x_train[:ROWS], data.y_train[:ROWS]


def batch_options_of(method: str) -> list[str]:
    fields = {field.name for field in dataclasses.fields(METHODS.get(method).options)}
    return [name for name in BATCH_OPTIONS if name in fields]


class Unread(TensorDataset):
    """A dataset whose items must not be read: the refusal comes before the loader is."""

    def __getitem__(self, index):
        pytest.fail("the loader was read")


@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # quick fits
@pytest.mark.parametrize("method", [pytest.param(name, marks=pytest.mark.long) if name in SECONDS else name
                                    for name in METHODS.names()])
def test_a_loader_gives_the_posterior_of_its_tensors_or_is_refused_before_it_is_read(method, rows):
    x, y = rows
    model = BayesianMLP(1, 1, hidden=(4,))
    options = {name: value for name, value in QUICK[method].items() if name not in BATCH_OPTIONS}
    batched = batch_options_of(method)
    if not batched:  # it computes on every row at each step
        with pytest.raises(ValueError, match=rf"method {method!r} computes on every training row at each step, not on "
                                             r"minibatches: it takes the data as tensors, not a loader"):
            fit(model, DataLoader(Unread(x, y), batch_size=BATCH), method, seed=0, progress=False, **options)
        return
    from_tensors = fit(model, (x, y), method, seed=0, progress=False, **options, **dict.fromkeys(batched, BATCH))
    from_loader = fit(model, DataLoader(TensorDataset(x, y), batch_size=BATCH), method, seed=0, progress=False, **options)
    assert from_loader.samples.keys() == from_tensors.samples.keys()
    for name, value in from_tensors.samples.items():
        assert torch.equal(from_loader.samples[name], value), name
    assert torch.equal(from_loader.x, x) and torch.equal(from_loader.y, from_tensors.y)


def test_a_shuffling_loader_is_read_whole_in_its_order(rows):
    x, y = rows
    read_x, read_y, batch_rows = read_loader(DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True,
                                                        generator=torch.Generator().manual_seed(0)), "svi")
    order = torch.argsort(read_x.flatten())
    assert batch_rows == BATCH and not torch.equal(read_x, x)
    assert torch.equal(read_x[order], x[torch.argsort(x.flatten())]) and torch.equal(read_y[order], y[torch.argsort(x.flatten())])


class Stream(IterableDataset):
    def __iter__(self):
        yield from zip(torch.randn(8, 1), torch.randn(8))


@pytest.mark.parametrize("loader, message", [
    (DataLoader(Stream(), batch_size=4), r"the loader's dataset \(Stream\) has no length: .* give a map-style dataset"),
    (DataLoader(TensorDataset(torch.randn(8, 1)), batch_size=4), r"batch 0 of the loader is a list, not a pair \(x, y\)"),
    (DataLoader(TensorDataset(torch.randn(8, 1, 2, 2), torch.randn(8)), batch_size=4),
     r"inputs of shape \(4, 1, 2, 2\): .* \(TensorDataset\(x.flatten\(1\), y\)\)"),
    (DataLoader(TensorDataset(torch.randn(0, 1), torch.randn(0)), batch_size=4), "the loader yields no batch"),
], ids=["no length", "not a pair", "images", "empty"])
def test_a_loader_that_is_not_rows_of_pairs_is_refused_naming_the_problem(loader, message):
    with pytest.raises(ValueError, match=message):
        fit(BayesianMLP(1, 1, hidden=(2,)), loader, "svi", steps=1, progress=False)


def test_a_batch_option_against_the_loaders_batches_is_refused(rows):
    with pytest.raises(ValueError, match=r"batch_size=8 and a loader of batches of 16 rows: the loader's batches set "
                                         r"batch_size; leave batch_size out, or build the loader with batch_size=8"):
        fit(BayesianMLP(1, 1, hidden=(2,)), DataLoader(TensorDataset(*rows), batch_size=BATCH), "svi", steps=1,
            batch_size=8, progress=False)


def test_data_larger_than_the_memory_is_refused_from_the_first_batch(rows, monkeypatch):
    read = []

    class Counted(TensorDataset):
        def __getitem__(self, index):
            read.append(index)
            return super().__getitem__(index)

    # 1,280 bytes wanted: 40 rows x 2 values (x and y) x 2 copies x 8 bytes
    monkeypatch.setattr(memory, "machine_memory", lambda: (4096, 1024))
    with pytest.raises(ValueError, match=r"method 'svi' needs at least .* \(the loader's rows, read and joined 1.19e-06 "
                                         r"GiB\), but this machine has 9.54e-07 GiB available"):
        fit(BayesianMLP(1, 1, hidden=(2,)), DataLoader(Counted(*rows), batch_size=BATCH), "svi", steps=1, progress=False)
    assert read == list(range(BATCH))  # the first batch only
