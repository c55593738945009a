"""Selective prediction (:mod:`bnn.inference.evaluation.selective`): the risk-coverage curve and its area."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from bnn.inference.evaluation.selective import area_under_risk_coverage, risk_coverage


def test_the_curve_keeps_the_most_certain_points_first():
    coverage, risk = risk_coverage(torch.tensor([0.3, 0.1, 0.2]), torch.tensor([1.0, 0.0, 1.0]))
    np.testing.assert_allclose(coverage, [1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(risk, [0, 0.5, 2 / 3])
    assert area_under_risk_coverage(torch.tensor([0.3, 0.1, 0.2]), torch.tensor([1.0, 0.0, 1.0])) == pytest.approx(
        (0 + 0.5 + 2 / 3) / 3)
    _, rmse = risk_coverage(torch.tensor([0.1, 0.2]), torch.tensor([4.0, 16.0]), root=True)
    np.testing.assert_allclose(rmse, [2, math.sqrt(10)])


def test_an_uncertainty_that_ignores_the_errors_averages_the_overall_risk_and_a_perfect_one_beats_it():
    generator = torch.Generator().manual_seed(0)
    errors = (torch.rand(500, generator=generator) < 0.2).double()
    blind = [area_under_risk_coverage(torch.rand(500, generator=generator), errors) for _ in range(400)]
    # each random order's AURC has mean exactly the error rate: the risk of k random points is unbiased for it
    assert abs(np.mean(blind) - float(errors.mean())) < 4 * np.std(blind) / math.sqrt(400)
    wrong = int(errors.sum())
    perfect = area_under_risk_coverage(errors, errors)  # the errors ranked last: risk 0 until n - wrong points are kept
    exact = sum((k - (500 - wrong)) / k for k in range(500 - wrong + 1, 501)) / 500
    assert perfect == pytest.approx(exact) and perfect < float(errors.mean()) / 2
