"""Calibration metrics (:mod:`bnn.inference.evaluation.calibration`) against closed forms, scikit-learn, and
synthetic predictors whose calibration is known."""

from __future__ import annotations

import math

import bnn.inference.evaluation.calibration as calibration
import numpy as np
import pytest
import torch
from bnn.inference.evaluation.calibration import (
    QUANTILE_LEVELS,
    brier_score,
    crps,
    probability_integral_transform,
    quantile_calibration,
    quantile_calibration_error,
    reliability_bins,
)
from scipy.stats import norm


def test_ece_and_mce_closed_form_in_equal_width_and_equal_mass_bins():
    # bin [0.8, 0.9): confidence 0.85 with accuracy 1/2 -> gap 0.35 on half the points; bin [0.9, 1]: 0.95 vs 1
    confidence = torch.tensor([0.85, 0.85, 0.95, 0.95])
    correct = torch.tensor([True, False, True, True])
    for binning in ("width", "mass"):  # two equal-mass bins of 10 on 4 points: runs of sizes 1 or 0 and so on
        bins = reliability_bins(confidence, correct, bins=2 if binning == "mass" else 10, binning=binning)
        assert bins.ece == pytest.approx(0.5 * 0.35 + 0.5 * 0.05) and bins.mce == pytest.approx(0.35)
    with pytest.raises(ValueError, match="binning must be one of"):
        reliability_bins(confidence, correct, binning="quantile")


def test_equal_mass_bins_hold_the_same_number_of_points_give_or_take_one():
    confidence = torch.rand(1003, generator=torch.Generator().manual_seed(0)) ** 4  # crowded near 0
    bins = reliability_bins(confidence, torch.ones(1003, dtype=torch.bool), binning="mass")
    assert len(bins.count) == 10 and bins.count.sum() == 1003 and bins.count.max() - bins.count.min() <= 1
    crowded = reliability_bins(confidence, torch.ones(1003, dtype=torch.bool), binning="width")
    assert crowded.count[0] > 500  # equal-width: over half the points in [0, 0.1)


def test_a_calibrated_predictor_has_an_ece_within_its_monte_carlo_error():
    generator = torch.Generator().manual_seed(1)
    confidence = 0.5 + 0.5 * torch.rand(200_000, generator=generator, dtype=torch.float64)
    correct = torch.rand(200_000, generator=generator, dtype=torch.float64) < confidence  # right with probability c
    for binning in ("width", "mass"):
        bins = reliability_bins(confidence, correct, binning=binning)
        # each bin's gap is the mean of count Bernoulli draws minus their mean probability: sd sqrt(c (1 - c) / count)
        bound = (bins.count * 4 * np.sqrt(bins.confidence * (1 - bins.confidence) / bins.count)).sum() / bins.count.sum()
        assert bins.ece < bound
    overconfident = reliability_bins(confidence, torch.rand(200_000, generator=generator) < confidence - 0.2)
    assert overconfident.ece == pytest.approx(0.2, abs=0.01)


def test_the_brier_score_is_scikit_learns_and_its_closed_form():
    y = torch.tensor([0, 1, 2])
    probs = torch.tensor([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
    assert brier_score("multiclass", probs, y) == pytest.approx((0.06 + 0.14 + 0.54) / 3)  # summed over classes
    assert brier_score("binary", torch.tensor([0.9, 0.2]), torch.tensor([1, 1])) == pytest.approx((0.01 + 0.64) / 2)
    assert brier_score("binary", torch.tensor([0.9, 0.8]), torch.tensor([1, 1])) == pytest.approx(0.025)  # one class


def test_the_pit_of_a_calibrated_predictive_is_uniform_and_of_an_overconfident_one_is_not():
    generator = torch.Generator().manual_seed(2)
    y = torch.randn(4000, generator=generator, dtype=torch.float64)
    calibrated = torch.randn(2000, 4000, generator=generator, dtype=torch.float64)
    pit = probability_integral_transform(calibrated, y)
    # the share of PIT values below each level is a mean of 4,000 Bernoulli(p) draws
    worst = 4 * math.sqrt(0.25 / 4000)
    assert np.abs(quantile_calibration(pit) - np.asarray(QUANTILE_LEVELS)).max() < worst
    narrow = probability_integral_transform(0.1 * calibrated, y)  # sd 0.1 for targets of sd 1
    exact = np.abs(norm.cdf(norm.ppf(QUANTILE_LEVELS) / 10) - np.asarray(QUANTILE_LEVELS)).mean()  # P(10 y <= z_p)
    assert quantile_calibration_error(narrow) == pytest.approx(exact, abs=worst)
    assert probability_integral_transform(torch.tensor([[1.0], [2.0], [2.0], [3.0]]), torch.tensor([2.0])).item() == 0.5


def test_the_crps_of_gaussian_draws_is_the_gaussian_closed_form():
    generator = torch.Generator().manual_seed(3)
    y = torch.linspace(-3, 3, 200, dtype=torch.float64)
    draws = 0.5 + 2 * torch.randn(4000, 200, generator=generator, dtype=torch.float64)
    z = (y.numpy() - 0.5) / 2
    exact = 2 * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))  # Gneiting and Raftery 2007
    error = crps(draws, y).numpy() - exact
    # the estimate of each point's CRPS from 4,000 draws errs by O(sigma / sqrt(S)): 0.03 at sigma 2
    assert np.abs(error).max() < 4 * 2 / math.sqrt(4000)


@pytest.mark.parametrize("draws, points", [(1, 3), (2, 5), (7, 11), (1000, 300)])
def test_the_crps_is_scoringrules_estimate_and_nan_where_the_target_is(draws, points):
    import scoringrules  # the reference implementation (numba); the package computes the same sum in torch

    generator = torch.Generator().manual_seed(draws)
    y = 3 * torch.randn(points, generator=generator, dtype=torch.float64)
    predictive = torch.randn(draws, points, generator=generator, dtype=torch.float64).exp()
    predictive[:, 0] = y[0]  # ties between the target and draws
    y[-1] = float("nan")
    expected = scoringrules.crps_ensemble(y.numpy(), predictive.numpy(), m_axis=0)
    assert np.allclose(crps(predictive, y).numpy(), expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert np.isnan(crps(predictive, y)[-1])


def test_the_crps_scored_in_column_blocks_is_the_crps_scored_at_once(monkeypatch):
    generator = torch.Generator().manual_seed(4)
    draws, y = torch.randn(50, 23, generator=generator), torch.randn(23, generator=generator)
    whole = crps(draws, y)
    monkeypatch.setattr(calibration, "CRPS_COLUMNS", 5)  # 23 columns in blocks of 5, 5, 5, 5, 3
    assert torch.equal(crps(draws, y), whole) and whole.dtype == torch.float64 and whole.shape == (23,)
