"""The Newton decrement and the Levenberg-Marquardt polish of bnn.inference.curvature.gauss_newton, against closed forms."""

from __future__ import annotations

import math
from collections import deque

import pytest
import torch
from bnn.inference.curvature.gauss_newton import (
    STALL_WINDOW,
    levenberg_marquardt,
    newton_decrement,
    stalled,
    uses_gauss_newton,
)
from bnn.models import BayesianMLP


class Steps:
    """A progress bar that counts its updates."""

    def __init__(self) -> None:
        self.n = 0

    def update(self, count: int = 1) -> None:
        self.n += count


def test_the_decrement_is_the_newton_step_in_posterior_standard_deviations():
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(4, 4, dtype=torch.float64, generator=generator)
    precision = root @ root.T + 4 * torch.eye(4, dtype=torch.float64)
    gradient = torch.randn(4, dtype=torch.float64, generator=generator)
    step = torch.linalg.solve(precision, gradient)
    assert newton_decrement(gradient, precision) == pytest.approx(math.sqrt(step @ precision @ step), rel=1e-12)
    diagonal = precision.diagonal()
    assert newton_decrement(gradient, diagonal) == pytest.approx(math.sqrt((gradient**2 / diagonal).sum()), rel=1e-12)
    assert newton_decrement(gradient, -precision) == math.inf  # not positive definite: never converged


def test_levenberg_marquardt_reaches_the_mode_of_a_gaussian_log_joint_and_stops_there():
    """log p = -1/2 (theta - m)^T A (theta - m): Gauss-Newton is exact, so the mode is reached at once, up to the
    damping (lambda = 1e-3 at the start: the first step leaves 1e-3 of the way, the next ones 1e-3 / 3, ...)."""
    generator = torch.Generator().manual_seed(1)
    root = torch.randn(5, 5, dtype=torch.float64, generator=generator)
    precision = root @ root.T + torch.eye(5, dtype=torch.float64)
    mode = torch.randn(5, dtype=torch.float64, generator=generator)

    def log_joint(theta, latents):
        return -0.5 * (theta - mode) @ precision @ (theta - mode)

    steps = Steps()
    theta, iterations = levenberg_marquardt(log_joint, lambda theta: {}, lambda theta, latents: precision.clone(),
                                            torch.zeros(5, dtype=torch.float64), start=0, tolerance=1e-10,
                                            max_iterations=50, progress_bar=steps)
    torch.testing.assert_close(theta, mode, rtol=0, atol=1e-9)
    assert iterations == steps.n <= 6


def test_levenberg_marquardt_holds_the_entries_before_start():
    precision = torch.eye(3, dtype=torch.float64)

    def log_joint(theta, latents):
        return -0.5 * (theta**2).sum()

    start = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    theta, _ = levenberg_marquardt(log_joint, lambda theta: {}, lambda theta, latents: precision[1:, 1:].clone(), start,
                                   start=1, tolerance=1e-10, max_iterations=50, progress_bar=Steps())
    assert theta[0] == 1.0 and theta[1:].abs().max() < 1e-9


def test_the_polish_is_lbfgs_where_a_gauss_newton_step_costs_too_much():
    model = BayesianMLP(9, 1, hidden=(100,))  # protein's network: 1,101 weights
    assert uses_gauss_newton(model, rows=7373, covered=1101)
    assert not uses_gauss_newton(model, rows=41157, covered=1101)  # 41,157 x 1,101^2 = 5e10 > 1e10
    assert not uses_gauss_newton(BayesianMLP(100, 1, hidden=(50,)), rows=10, covered=5101)  # above 4,096 weights


def test_the_polish_is_stalled_when_its_recent_rise_kept_up_cannot_reach_the_tolerance():
    """Stalled iff mean rise x steps left < (delta^2 - tolerance^2) / 2, once STALL_WINDOW rises are in."""
    rises = deque([1e-4] * STALL_WINDOW, maxlen=STALL_WINDOW)  # 1e-4 nats a step
    # delta = 3 to tolerance 1: (9 - 1) / 2 = 4 nats still to rise
    assert stalled(rises, steps_left=39_999, decrement=3.0, tolerance=1.0)  # 3.9999 nats within reach
    assert not stalled(rises, steps_left=40_001, decrement=3.0, tolerance=1.0)  # 4.0001
    assert not stalled(deque([1e-4] * (STALL_WINDOW - 1)), steps_left=1, decrement=3.0, tolerance=1.0)  # window not full
