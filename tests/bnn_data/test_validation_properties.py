"""Property-based tests: any data ends in a correct fit or a ValueError that names the problem."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from inference import fit
from models import BayesianMLP

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int8, np.bool_, np.complex64, np.str_])


def arrays_of(shapes):
    """Arrays of any listed dtype; float elements include NaN, infinities and the dtype's extremes."""
    return DTYPES.flatmap(lambda dtype: arrays(dtype, shapes))


def run_tiny_fit(x, y, likelihood="gaussian", out=1):
    model = BayesianMLP(2, out, hidden=(2,), likelihood=likelihood)
    return fit(model, (x, y), steps=1, num_draws=2, progress=False)


@SETTINGS
@given(x=arrays_of(array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)),
       y=arrays_of(array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)))
def test_any_regression_data_fits_or_raises_value_error(x, y):
    try:
        posterior = run_tiny_fit(x, y)
    except ValueError as error:
        assert str(error)
        return
    # accepted data is exactly the well-formed case
    values = np.asarray(x, dtype=np.float64)
    assert values.ndim == 2 and values.shape[1] == 2 and np.isfinite(values).all()
    assert np.asarray(y).shape == (values.shape[0],)
    assert all(math.isfinite(e) for e in posterior.info["elbo"])


@SETTINGS
@given(labels=arrays(np.float64, st.integers(1, 8), elements=st.one_of(
    st.sampled_from([0.0, 1.0, 2.0, -1.0, 0.5]), st.floats(allow_nan=True, allow_infinity=True))),
       likelihood=st.sampled_from(["bernoulli", "categorical"]))
def test_labels_outside_the_support_are_refused(labels, likelihood):
    x = np.zeros((len(labels), 2))
    out = 1 if likelihood == "bernoulli" else 2
    try:
        run_tiny_fit(x, labels, likelihood, out)
    except ValueError as error:
        assert any(word in str(error) for word in ("NaN", "infinite", "labels", "whole numbers", "too large"))
        return
    allowed = {0.0, 1.0}
    assert set(labels.tolist()) <= allowed


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_huge_and_tiny_values_either_fit_or_are_refused(scale):
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(0)).numpy() * scale
    try:
        run_tiny_fit(x, np.zeros(6))
    except ValueError as error:
        assert "too large" in str(error) or "ELBO" in str(error)
