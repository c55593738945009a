"""The compiled kernel: its exp and activations to a few ulp, the C callback nutpie calls equal to the Python call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from bnn.inference.nuts import numba_kernel as kernel
from bnn.inference.nuts.kernel_layout import ACTIVATION_CODES
from bnn.inference.nuts.potential import Backend, FlatPotential
from bnn.models import BayesianMLP

EPS = np.finfo(np.float64).eps


def test_expm1_to_a_few_ulp_down_to_the_smallest_normal_exponent():
    x = -np.concatenate([np.geomspace(1e-300, 1.0, 2000), np.linspace(1.0, 708.0, 4000)])
    got = np.array([kernel.expm1_nonpositive(value) for value in x])
    np.testing.assert_allclose(got, np.expm1(x), rtol=4 * EPS, atol=0.0)
    assert kernel.expm1_nonpositive(0.0) == 0.0


def test_tanh_and_sigmoid_to_a_few_ulp():
    a = np.concatenate([np.linspace(-40.0, 40.0, 4001), np.geomspace(1e-12, 1.0, 200), -np.geomspace(1e-12, 1.0, 200)])
    h = np.empty_like(a)
    kernel.activate(ACTIVATION_CODES["tanh"], a, h)
    np.testing.assert_allclose(h, np.tanh(a), rtol=4 * EPS, atol=0.0)
    kernel.activate(ACTIVATION_CODES["sigmoid"], a, h)
    np.testing.assert_allclose(h, torch.sigmoid(torch.from_numpy(a)).numpy(), rtol=4 * EPS, atol=0.0)


@pytest.fixture
def potential():
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(30, 3, generator=generator, dtype=torch.float64), torch.randn(30, generator=generator, dtype=torch.float64)
    model = BayesianMLP(3, 1, hidden=(8, 5), likelihood={"name": "gaussian", "scale": None})
    return FlatPotential(model, x, y, backend=Backend.NUMBA)


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def test_the_c_callback_is_the_python_call(potential):
    z = np.random.default_rng(1).normal(size=potential.dim)
    value, gradient = potential.value_and_grad(z)
    density = potential.evaluator
    out, logp = np.empty(potential.dim), np.empty(1)
    status = kernel.nutpie_log_density.ctypes(potential.dim, _pointer(z), _pointer(out), _pointer(logp),
                                              ctypes.c_void_p(density.buffer.ctypes.data))
    assert status == 0 and logp[0] == value
    np.testing.assert_array_equal(out, gradient)
    wrong = kernel.nutpie_log_density.ctypes(potential.dim + 1, _pointer(z), _pointer(out), _pointer(logp),
                                             ctypes.c_void_p(density.buffer.ctypes.data))
    assert wrong == -1
    draw = np.empty(potential.dim)
    assert kernel.nutpie_expand.ctypes(potential.dim, potential.dim, _pointer(z), _pointer(draw), None) == 0
    np.testing.assert_array_equal(draw, z)


def test_the_work_space_carries_nothing_from_one_call_to_the_next(potential):
    first, second = np.random.default_rng(2).normal(size=(2, potential.dim))
    value, gradient = potential.value_and_grad(first)
    potential.value_and_grad(second)
    again, gradient_again = potential.value_and_grad(first)
    assert again == value
    np.testing.assert_array_equal(gradient_again, gradient)
