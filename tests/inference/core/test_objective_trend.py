"""SVI's own check: a run whose ELBO is still rising at its end says so, loudly."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.core.objective_trend import FLAT_SHARE, MIN_WINDOW, RISE_Z, START_STEPS, objective_trend
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.svi.schedules import LRSchedule
from bnn.models import BayesianMLP


def noisy_trace(slope: float, steps: int = 2000, sd: float = 5.0, seed: int = 0) -> list[float]:
    """``slope * t`` plus independent Gaussian noise of standard deviation ``sd``."""
    generator = torch.Generator().manual_seed(seed)
    noise = sd * torch.randn(steps, generator=generator, dtype=torch.float64)
    return [slope * t + float(e) for t, e in enumerate(noise)]


def test_under_a_constant_rate_the_windows_are_the_last_two_tenths_and_the_noise_is_about_their_lines():
    trace = noisy_trace(0.01)
    trend = objective_trend(trace)
    earlier, later = np.array(trace[1600:1800]), np.array(trace[1800:])
    assert (trend.earlier_steps, trend.later_steps) == (200, 200)
    assert trend.gain == pytest.approx(later.mean() - earlier.mean(), rel=1e-12)
    steps = np.arange(200.0)
    spread = [np.sqrt(np.sum((w - np.polyval(np.polyfit(steps, w, 1), steps)) ** 2) / 198) for w in (earlier, later)]
    assert trend.noise == pytest.approx(spread[1], rel=1e-12)
    assert trend.standard_error == pytest.approx(math.sqrt((spread[0] ** 2 + spread[1] ** 2) / 200), rel=1e-12)
    assert spread[1] == pytest.approx(5.0, rel=0.15)  # the trace's own noise, its slope removed


def test_under_a_constant_rate_a_rise_of_three_standard_errors_is_rising_and_a_flat_trace_is_not():
    # windows of 200 steps with noise sd 5: SE = 5 sqrt(2 / 200) = 0.5; the slope 0.015 gains 0.015 * 200 = 3 = 6 SE
    trend = objective_trend(noisy_trace(0.015))
    assert trend.rising and trend.rate_drop == 0.0 and trend.gain < trend.noise  # no settling allowance
    # a flat trace crosses 3 SE with probability 1.3e-3: none of 20 fixed seeds does
    assert not any(objective_trend(noisy_trace(0.0, seed=seed)).rising for seed in range(20))
    assert RISE_Z == 3.0


def test_under_a_decaying_rate_a_gain_within_the_settling_allowance_is_drift_and_a_larger_one_a_climb():
    steps = 2000
    rates = [LRSchedule.COSINE.factor(step, steps, 0.01) for step in range(steps)]
    flat = noisy_trace(0.0, steps=steps)
    drift = objective_trend(flat, rates)
    later = slice(steps - drift.later_steps, steps)
    earlier = slice(steps - drift.later_steps - drift.earlier_steps, steps - drift.later_steps)
    assert drift.rate_drop == pytest.approx(1 - np.mean(rates[later]) / np.mean(rates[earlier]), rel=1e-12)
    assert 0.6 < drift.rate_drop < 0.8

    def lifted(by: float) -> list[float]:  # the later window raised by `by` nats
        return [value + (by if step >= later.start else 0.0) for step, value in enumerate(flat)]

    allowance = drift.rate_drop * drift.noise
    settling, climbing = objective_trend(lifted(0.6 * allowance), rates), objective_trend(lifted(1.5 * allowance), rates)
    assert settling.gain > RISE_Z * settling.standard_error and not settling.rising  # significant, but drift
    assert climbing.rising


def test_a_run_flattened_by_its_decaying_rate_is_still_rising_when_cut_by_the_rate():
    # the ELBO climbs at a pace proportional to the rate: cut by steps, its end looks flat
    steps = 2000
    rates = [LRSchedule.COSINE.factor(step, steps, 0.01) for step in range(steps)]
    progress = np.cumsum(rates)
    trace = [0.1 * float(p) + e for p, e in zip(progress, noisy_trace(0.0, steps=steps, sd=5.0))]
    assert not objective_trend(trace).rising  # the last two tenths of the steps
    trend = objective_trend(trace, rates)
    assert trend.rising and trend.later_steps > 200 and trend.earlier_steps + trend.later_steps > 400


def test_flat_is_a_last_gain_within_a_share_of_the_runs_rise_whatever_its_noise():
    # a saturating climb 1 - exp(-t / tau) with noise sd 0.01, windows of the last two tenths (constant rate): the rise
    # is the later window's mean less the first steps', the gain the later window's mean less the earlier one's
    def climb(tau: float) -> list[float]:
        noise = 0.01 * torch.randn(2000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        return [1 - math.exp(-t / tau) + float(e) for t, e in enumerate(noise)]

    for tau, flat in [(200.0, True), (2000.0, False)]:
        trace = climb(tau)
        trend = objective_trend(trace)
        assert trend.rise == pytest.approx(np.mean(trace[1800:]) - np.mean(trace[:START_STEPS]), rel=1e-12)
        assert trend.flat is flat and (trend.gain <= FLAT_SHARE * trend.rise) is flat
    # a run that barely moved (a rate far too small) is not flat although its gain is within its noise
    crawl = objective_trend(noisy_trace(1e-5, sd=0.01))
    assert not crawl.rising and not crawl.flat
    assert "had not flattened when M stopped" in crawl.shortfall_sentence("O", "M", "fix it")


def test_the_windows_hold_a_tenth_of_the_rate_each_and_at_least_the_fewest_steps():
    steps = 1000
    rates = [LRSchedule.COSINE.factor(step, steps, 0.01) for step in range(steps)]
    trend = objective_trend(noisy_trace(0.0, steps=steps), rates)
    total = sum(rates)
    later = sum(rates[-trend.later_steps:])
    earlier = sum(rates[-trend.later_steps - trend.earlier_steps:-trend.later_steps])
    assert later >= 0.1 * total > later - rates[-trend.later_steps]  # the fewest last steps holding a tenth
    assert earlier >= 0.1 * total > earlier - rates[-trend.later_steps - trend.earlier_steps]
    assert objective_trend(noisy_trace(0.0, steps=2 * MIN_WINDOW), [1.0] * 2 * MIN_WINDOW).later_steps == MIN_WINDOW


def test_a_run_shorter_than_two_windows_or_with_a_non_finite_estimate_is_not_judged():
    assert objective_trend(noisy_trace(1.0, steps=2 * MIN_WINDOW - 1)) is None
    assert objective_trend(noisy_trace(1.0, steps=2 * MIN_WINDOW)) is not None
    assert objective_trend([*noisy_trace(1.0), math.nan]) is None


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
