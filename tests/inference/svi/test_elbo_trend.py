"""SVI's own check: a run whose ELBO is still rising at its end says so, loudly."""

from __future__ import annotations

import math
import statistics
import warnings

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.svi.elbo_trend import MIN_WINDOW, RISE_Z, elbo_trend
from bnn.models import BayesianMLP


def noisy_trace(slope: float, steps: int = 2000, sd: float = 5.0, seed: int = 0) -> list[float]:
    """``slope * t`` plus independent Gaussian noise of standard deviation ``sd``."""
    generator = torch.Generator().manual_seed(seed)
    noise = sd * torch.randn(steps, generator=generator, dtype=torch.float64)
    return [slope * t + float(e) for t, e in enumerate(noise)]


def test_gain_and_standard_error_are_those_of_the_last_two_windows():
    trace = noisy_trace(0.01)
    trend = elbo_trend(trace)
    window = len(trace) // 10
    earlier, later = trace[-2 * window:-window], trace[-window:]
    assert trend.window == window == 200
    assert trend.gain == pytest.approx(statistics.fmean(later) - statistics.fmean(earlier), rel=1e-12)
    assert trend.standard_error == pytest.approx(
        math.sqrt((statistics.variance(earlier) + statistics.variance(later)) / window), rel=1e-12)


def test_a_trace_rising_by_six_standard_errors_is_rising_and_a_flat_one_is_not():
    # windows of 200 steps with noise sd 5: SE = 5 sqrt(2 / 200) = 0.5; the slope 0.015 gains 0.015 * 200 = 3 = 6 SE
    assert elbo_trend(noisy_trace(0.015)).rising
    # a flat trace crosses 3 SE with probability 1.3e-3: none of 20 fixed seeds does
    assert not any(elbo_trend(noisy_trace(0.0, seed=seed)).rising for seed in range(20))
    assert RISE_Z == 3.0


def test_a_run_shorter_than_two_windows_or_with_a_non_finite_estimate_is_not_judged():
    assert elbo_trend(noisy_trace(1.0, steps=2 * MIN_WINDOW - 1)) is None
    assert elbo_trend(noisy_trace(1.0, steps=2 * MIN_WINDOW)) is not None
    assert elbo_trend([*noisy_trace(1.0), math.nan]) is None


def fit_toy(**options):
    model = BayesianMLP(1, 1, hidden=(8,))
    return fit(model, load_toy1d(n_train=40, n_test=10), "svi", seed=0, progress=False, num_samples=10, **options)


@pytest.mark.long
def test_a_fit_stopped_while_its_elbo_rises_warns_and_its_record_says_so():
    with pytest.warns(ConvergenceWarning, match=r"ELBO was still rising .* give it more steps") as caught:
        posterior = fit_toy(steps=200, lr_schedule="constant", lr=0.003)
    assert caught[0].filename == __file__  # the warning points at the user's call
    assert posterior.record.converged is False
    assert any("still rising" in problem for problem in posterior.record.problems())


@pytest.mark.long
def test_a_fit_run_to_its_plateau_passes_the_check():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        posterior = fit_toy(steps=3000)
    assert posterior.record.converged is True
    assert posterior.record.problems() == []
