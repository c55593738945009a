"""Property-based tests: any data ends in a correct fit or a ValueError that names the problem.

Each generated case is well-formed data (which must fit: finite ELBO, finite predictions) or
well-formed data with one defect put in at random (NaN, infinities or values beyond float32 at
random positions, a wrong shape, length or dtype, no examples), together with the words the
``ValueError`` must use to name that defect.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.models import BayesianMLP
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

FEATURES = 2
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
ROWS = st.integers(1, 6)
NUMERIC_DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int8, np.bool_])


@dataclass(frozen=True)
class Case:
    """Data to fit, the pattern its ``ValueError`` must match (``None``: the data is well-formed) and the
    kind of defect (reported by ``--hypothesis-show-statistics``)."""

    x: object
    y: object
    error: str | None = None
    defect: str = "none"


def numbers(dtype, shape):
    """Finite arrays of ``dtype``; floats within +-1000, so every float width holds them."""
    if dtype == np.bool_:
        return arrays(dtype, shape)
    if np.issubdtype(dtype, np.integer):
        return arrays(dtype, shape, elements=st.integers(-100, 100))
    return arrays(dtype, shape, elements=st.floats(-1e3, 1e3, width=8 * np.dtype(dtype).itemsize))


def well_formed(rows=ROWS):
    """Inputs ``(n, 2)`` and regression targets ``(n,)`` of any numeric dtype, all finite; one row, or a target that is
    the same in every row (in the dtype the fit computes in), is a defect of its own: nothing to learn."""
    return rows.flatmap(lambda n: st.builds(Case, NUMERIC_DTYPES.flatmap(lambda d: numbers(d, (n, FEATURES))),
                                            NUMERIC_DTYPES.flatmap(lambda d: numbers(d, (n,))))).map(nothing_to_learn)


def nothing_to_learn(case: Case) -> Case:
    """``case`` with the error of a single row or a constant target when it has one."""
    y = torch.as_tensor(np.asarray(case.y, dtype=np.float64)).to(torch.get_default_dtype())
    if y.shape[0] == 1:
        return Case(case.x, case.y, "the data has a single training row: .* give two rows or more", "one row")
    if bool((y == y[0]).all()):
        return Case(case.x, case.y, r"the regression target is constant \(.* in every training row\): nothing to learn",
                    "constant target")
    return case


@st.composite
def non_finite(draw, kind):
    """Well-formed data with ``kind`` of entry (NaN, +-inf or a value beyond float32) put at 1 to 3 random
    entries of x or y."""
    case = draw(well_formed())
    which = draw(st.sampled_from(["x", "y"]))
    values = np.array(getattr(case, which), dtype=np.float64)
    flat = draw(st.lists(st.integers(0, values.size - 1), min_size=1, max_size=3, unique=True))
    bad = {"NaN": st.just(math.nan), "infinite values": st.sampled_from([math.inf, -math.inf]),
           "too large": st.floats(1e39, 1e308) | st.floats(-1e308, -1e39)}[kind]
    for position in flat:
        values.flat[position] = draw(bad)
    name = "inputs x" if which == "x" else "targets y"
    if kind == "too large":
        error = f"{name} has values too large for torch.float32; rescale the data first"
    else:
        row = min(position // (values.size // values.shape[0]) for position in flat)
        error = f"{name} contains {kind} ({len(flat)} entries, first in row {row}); drop or impute those rows"
    return Case(**{"x": case.x, "y": case.y, which: values}, error=re.escape(error), defect=kind)


@st.composite
def malformed_shape(draw):
    """Well-formed dtypes with a wrong number of dimensions, features, outputs or rows, or no rows at all."""
    n = draw(ROWS)
    x, y = draw(numbers(np.float64, (n, FEATURES))), draw(numbers(np.float64, (n,)))
    m = n + draw(st.sampled_from([-1, 1, 2])) if n > 1 else n + 1
    d = draw(st.sampled_from([1, 3, 4]))
    k = draw(st.integers(1, 3))
    case = draw(st.sampled_from([
        Case(x.ravel(), y, r"inputs x must be 2-D of shape \(n, features\), got shape"),
        Case(x[..., None].repeat(k, -1), y, r"inputs x must be 2-D of shape \(n, features\), got shape"),
        Case(np.float64(1.0), y, r"inputs x is a scalar; pass an array with one row per example"),
        Case(x, np.float64(1.0), r"targets y is a scalar"),
        Case(x, y[:, None].repeat(k, -1), rf"regression targets for 1 output\(s\) must have shape \({n},\), got \({n}, {k}\)"),
        Case(x, y[:, None, None], r"targets y must have shape \(n,\) or \(n, outputs\), got"),
        Case(x, np.zeros(m), rf"inputs and targets differ in length: x has {n} rows, y has {m}"),
        Case(np.zeros((0, FEATURES)), np.zeros(0), r"inputs x is empty \(shape \(0, 2\)\); a fit needs at least one example"),
        Case(np.zeros((n, 0)), y, rf"inputs x is empty \(shape \({n}, 0\)\)"),
        Case(x, np.zeros(0), r"targets y is empty"),
        Case(np.zeros((n, d)), y, rf"the model reads {FEATURES} input features but x has {d}"),
    ]))
    return Case(case.x, case.y, case.error, defect="shape, length or size")


@st.composite
def malformed_dtype(draw):
    """Text, complex, object or ragged data in place of x or y."""
    n = draw(ROWS)
    x, y = np.zeros((n, FEATURES)), np.zeros(n)
    text = draw(arrays(np.str_, (n,), elements=st.text(max_size=3)))
    case = draw(st.sampled_from([
        Case(x, text, rf"targets y must be numeric, got dtype {re.escape(str(text.dtype))}"),
        Case(x.astype(np.complex64), y, r"inputs x must be real, got complex dtype complex64"),
        Case(x, np.array([None] * n), r"targets y must be numeric, got dtype object"),
        Case([[0.0] * FEATURES] * n + [[0.0]], np.zeros(n + 1), r"inputs x is ragged or not array-like"),
    ]))
    return Case(case.x, case.y, case.error, defect="dtype")


CASES = st.one_of(well_formed(), *(non_finite(kind) for kind in ("NaN", "infinite values", "too large")),
                  malformed_shape(), malformed_dtype())


def run_tiny_fit(x, y, likelihood="gaussian", out=1):
    model = BayesianMLP(FEATURES, out, hidden=(2,), likelihood=likelihood)
    return fit(model, (x, y), steps=2, num_samples=3, progress=False)


def assert_finite_fit(posterior, x):
    inputs = torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=torch.get_default_dtype())
    prediction = posterior.predict(inputs, num_samples=3)
    assert len(posterior.record.elbo) == 2 and all(math.isfinite(e) for e in posterior.record.elbo)
    assert prediction.mean.shape == (inputs.shape[0],)
    assert torch.isfinite(prediction.mean).all() and torch.isfinite(prediction.std).all()


@pytest.mark.long
@SETTINGS
@given(case=CASES)
@example(case=Case(np.zeros((3, FEATURES)), np.array([0.0, math.nan, 1.0]),
                   re.escape("targets y contains NaN (1 entries, first in row 1)"), "NaN"))
def test_any_regression_data_fits_or_raises_a_value_error_naming_the_defect(case):
    event(case.defect)
    if case.error is None:
        assert_finite_fit(run_tiny_fit(case.x, case.y), case.x)
    else:
        with pytest.raises(ValueError, match=case.error):
            run_tiny_fit(case.x, case.y)


@pytest.mark.long
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(labels=arrays(np.float64, st.integers(2, 8), elements=st.one_of(
    st.sampled_from([0.0, 1.0, 2.0, -1.0, 0.5]), st.floats(allow_nan=True, allow_infinity=True))),
       likelihood=st.sampled_from(["bernoulli", "categorical"]))
def test_labels_outside_the_support_are_refused(labels, likelihood):
    x = np.zeros((len(labels), FEATURES))
    out = 1 if likelihood == "bernoulli" else 2
    if set(labels.tolist()) <= {0.0, 1.0}:
        posterior = run_tiny_fit(x, labels, likelihood, out)
        assert all(math.isfinite(e) for e in posterior.record.elbo)
        return
    with pytest.raises(ValueError) as error:
        run_tiny_fit(x, labels, likelihood, out)
    assert any(word in str(error.value) for word in ("NaN", "infinite", "labels", "whole numbers", "too large"))


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_huge_and_tiny_inputs_fit_with_a_finite_elbo_and_predictions(scale):
    """Inputs of 1e30 saturate tanh and inputs of 1e-30 vanish; neither overflows float32."""
    x = torch.randn(6, FEATURES, generator=torch.Generator().manual_seed(0)).numpy() * scale
    assert_finite_fit(run_tiny_fit(x, np.arange(6.0)), x)
