"""Fixtures shared across the test packages."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # make test runs a worker per core: each computes on one torch thread, or the OpenMP threads of the work outside
    # the fits (which run on one thread already) spin for the core the other worker holds. Set before bnn is imported,
    # so that bnn takes it for torch's default, not for a count a user chose
    torch.set_num_threads(1)

from bnn.runtime import workers  # noqa: E402
from bnn.runtime.lazy_arviz import load_arviz  # noqa: E402
from tests.support.conjugate import conjugate_problem  # noqa: E402
from tests.support.uci import write_uci_folder  # noqa: E402

pytest_plugins = ["tests.support.module_order"]  # the modules longest first, for make test's workers

load_arviz()  # tests call arviz directly too: configured as the package configures it at its first use of arviz


def pytest_collection_modifyitems(config, items) -> None:
    """Skip the tests marked ``gpu`` where torch sees no CUDA device (they run where one is)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """``dtype`` as torch's default dtype inside the block, the previous one restored after it."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture(scope="module")
def conjugate():
    """The conjugate linear-regression problem of :mod:`tests.support.conjugate`, in float64 for the module."""
    with default_dtype(torch.float64):
        yield conjugate_problem()


@pytest.fixture()
def float64():
    """float64 as torch's default dtype for the test (``pytestmark = pytest.mark.usefixtures("float64")``)."""
    with default_dtype(torch.float64):
        yield


@pytest.fixture()
def float32():
    """The library's usual default dtype, for a test in a module whose ``conjugate`` sets float64 while it lives."""
    with default_dtype(torch.float32):
        yield


@pytest.fixture
def two_threads_by_default(monkeypatch):
    """torch on two threads, taken for its default (a process started on two or more cores with no thread variable),
    whatever this process started with (a test worker computes on one); the count put back after the test."""
    for name in workers.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(workers, "STARTING_THREADS", 2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_uci(tmp_path) -> Path:
    """A folder holding one small data set in the UCI layout, ``tiny``, with two splits (``bnn uci`` and its runner)."""
    return write_uci_folder(tmp_path / "uci", "tiny")


@pytest.fixture(autouse=True)
def ctrl_c_raises_keyboard_interrupt():
    """SIGINT with Python's own handler during each test, the inherited disposition restored after it.

    A test run started as a background job of a non-interactive shell (``make test &``, some CI runners) inherits an
    ignored SIGINT, which the collection rightly leaves alone; the tests of Ctrl-C need one that raises. SIGTERM's
    disposition is put back too: ``bnn``'s exit after a stop ignores both signals, as a process about to end."""
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for signum, handler in zip((signal.SIGINT, signal.SIGTERM), previous):
        if handler is not None:  # None: a handler installed outside Python, which cannot be put back
            signal.signal(signum, handler)
