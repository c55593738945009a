"""Fixtures shared across the test packages."""

from __future__ import annotations

import pytest
import torch

from tests.conjugate import conjugate_problem


@pytest.fixture(scope="module")
def conjugate():
    """The conjugate linear-regression problem of :mod:`tests.conjugate`, in float64 for the module."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield conjugate_problem()
    torch.set_default_dtype(previous)
