r"""Gauss-Newton for the log joint: its precision, the Newton decrement, and a Levenberg-Marquardt polish.

At weights :math:`\theta` (the entries from ``start`` on; the rest held fixed) the Gauss-Newton precision of the
log joint is

.. math::

    \Lambda(\theta) = G(\theta) + \operatorname{diag}\big(\max(P(\theta), 0)\big),\qquad
    P_k = -\frac{\partial^2}{\partial\theta_k^2} \log p(\theta_k),

with :math:`G` the GGN of the negative log-likelihood (:mod:`bnn.inference.curvature.output_curvature`): the precision of
the Laplace approximation there, positive semi-definite by construction. With :math:`g = \nabla_\theta \log
p(y, \theta \mid x)`, the Newton decrement

.. math::

    \delta(\theta) = \sqrt{g^\top \Lambda^{-1} g}

is the length of the Newton step in posterior standard deviations: to second order the mode lies
:math:`\delta` standard deviations away, and :math:`\mathrm{KL}\big(\mathcal{N}(\theta, \Lambda^{-1})\,\|\,
\mathcal{N}(\theta_{MAP}, \Lambda^{-1})\big) = \delta^2 / 2`. It is the convergence test of the MAP fit: unlike a
tolerance on gradient entries it does not depend on the number of data points nor on the units of the weights.

The Levenberg-Marquardt polish (Marquardt 1963) steps :math:`\theta \leftarrow \theta + (\Lambda + \lambda\,
\operatorname{diag}\Lambda)^{-1} g`, keeping a step only where it raises the log joint and raising the damping
:math:`\lambda` otherwise; a learned noise is reset to its maximum-likelihood value after each step (a coordinate
ascent, so the log joint never falls).

Near a mode :math:`\delta^2/2` is the rise of the log joint still to come. The polish stops as stalled when the rise
of its last :data:`STALL_WINDOW` steps, kept up for every step left, would not cover the rise still needed to reach
the tolerance, :math:`(\delta^2 - \text{tolerance}^2)/2`: at a kink of a ReLU network (a unit switching exactly at
a training input) the accepted steps shrink toward zero and the decrement never falls, and Gauss-Newton's gains near
a mode shrink geometrically, so a linear extrapolation of recent gains only overestimates what is left to gain.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import torch
from bnn.inference.curvature.output_curvature import OUTPUT_HESSIANS, gauss_newton_matrix

GAUSS_NEWTON_MAX_WEIGHTS = 4096
r"""Above this many weights the polish is L-BFGS and :math:`\delta` comes by conjugate gradients on a matrix-free
:math:`\Lambda` (:mod:`bnn.inference.curvature.cg_decrement`; a dense :math:`\Lambda` takes :math:`D^2` memory)."""
GAUSS_NEWTON_MAX_WORK = 1e10
r"""Above this many multiply-adds per step, :math:`n K D^2` for forming :math:`G`, the polish is L-BFGS too (a step
would take seconds: 41,157 rows and 1,101 weights, protein's, cost 5e10)."""
JITTER = 1e-10
r"""Added to :math:`\Lambda`'s diagonal, times its mean, so that a weight without curvature (a Laplace prior's) keeps
:math:`\Lambda` invertible."""
INITIAL_DAMPING, MIN_DAMPING, MAX_DAMPING = 1e-3, 1e-9, 1e12
STALL_WINDOW = 50
"""Steps whose rise of the log joint the stall test extrapolates (module notes)."""

LogJoint = Callable[[torch.Tensor, dict], torch.Tensor]


def elementwise_curvature(distribution, value: torch.Tensor) -> torch.Tensor:
    r""":math:`-\partial^2 \log p(v_k) / \partial v_k^2` for each entry of ``value`` (an elementwise-independent prior)."""
    value = value.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (slope,) = torch.autograd.grad(-distribution.log_prob(value).sum(), value, create_graph=True)
        if not slope.requires_grad:  # the log-density is linear in value
            return torch.zeros_like(value)
        (curvature,) = torch.autograd.grad(slope.sum(), value, materialize_grads=True)
    return curvature.detach()


def uses_gauss_newton(model, rows: int, covered: int) -> bool:
    """Whether the MAP polish is Levenberg-Marquardt (a GGN for the likelihood, at most
    :data:`GAUSS_NEWTON_MAX_WEIGHTS` covered weights and :data:`GAUSS_NEWTON_MAX_WORK` per step) rather than L-BFGS."""
    return (type(model.likelihood) in OUTPUT_HESSIANS and covered <= GAUSS_NEWTON_MAX_WEIGHTS
            and rows * model.out_features * covered**2 <= GAUSS_NEWTON_MAX_WORK)


def log_joint_precision(model, x: torch.Tensor, theta: torch.Tensor, latents: dict, prior_curvature: torch.Tensor,
                        *, start: int, diagonal: bool) -> torch.Tensor:
    r""":math:`\Lambda(\theta)` of the module notes over the entries from ``start`` on, ``(D_c, D_c)`` or its diagonal.

    ``prior_curvature`` is :math:`P` over those entries. A likelihood without a GGN contributes nothing, so
    :math:`\delta` is then an upper bound wherever the likelihood's own curvature is positive semi-definite.
    """
    covered = theta.shape[0] - start
    if type(model.likelihood) in OUTPUT_HESSIANS:
        precision = gauss_newton_matrix(model, x, theta, latents, start=start, diagonal=diagonal)
    else:
        precision = theta.new_zeros(covered if diagonal else (covered, covered))
    diagonal_view = precision if diagonal else precision.diagonal()
    diagonal_view.add_(prior_curvature.clamp(min=0))
    diagonal_view.add_(JITTER * max(float(diagonal_view.mean()), 1.0))
    return precision


def newton_decrement(gradient: torch.Tensor, precision: torch.Tensor) -> float:
    r""":math:`\sqrt{g^\top \Lambda^{-1} g}` for a dense ``(D, D)`` or diagonal ``(D,)`` :math:`\Lambda`
    (infinite when :math:`\Lambda` is not positive definite)."""
    if precision.dim() == 1:
        return math.sqrt(float((gradient**2 / precision).sum()))
    lower, info = torch.linalg.cholesky_ex(precision)
    if info.item() != 0:
        return math.inf
    return float(torch.linalg.solve_triangular(lower, gradient.unsqueeze(1), upper=False).norm())


def levenberg_marquardt(log_joint: LogJoint, latents_at: Callable[[torch.Tensor], dict],
                        precision_at: Callable[[torch.Tensor, dict], torch.Tensor], theta: torch.Tensor, *, start: int,
                        tolerance: float, max_iterations: int, progress_bar) -> tuple[torch.Tensor, int]:
    r"""Polish ``theta`` (its entries from ``start`` on) until :math:`\delta \le` ``tolerance``.

    Parameters
    ----------
    log_joint : callable
        ``log_joint(theta, latents)``: :math:`\log p(y, \theta \mid x)` as a differentiable scalar.
    latents_at : callable
        The likelihood's latents at their maximum-likelihood value for ``theta`` (``{}`` when it has none).
    precision_at : callable
        :math:`\Lambda` over the entries from ``start`` on, dense, at ``(theta, latents)``.
    max_iterations : int
        Steps at most; the polish also stops when no damping up to :data:`MAX_DAMPING` raises the log joint, and when
        it stalls (module notes).
    progress_bar
        A tqdm-like bar updated once per step.

    Returns
    -------
    tuple
        The polished ``theta`` and the number of steps taken.
    """
    damping, rises = INITIAL_DAMPING, deque(maxlen=STALL_WINDOW)
    for iteration in range(max_iterations):
        latents = latents_at(theta)
        point = theta.clone().requires_grad_(True)
        with torch.enable_grad():
            value = log_joint(point, latents)
            (gradient,) = torch.autograd.grad(value, point)
        gradient = gradient[start:]
        precision = precision_at(theta, latents)
        decrement = newton_decrement(gradient, precision)
        if decrement <= tolerance or stalled(rises, max_iterations - iteration, decrement, tolerance):
            return theta, iteration
        scale = precision.diagonal().clone()
        while damping <= MAX_DAMPING:
            damped = precision.clone()
            damped.diagonal().add_(damping * scale)
            lower, info = torch.linalg.cholesky_ex(damped)
            if info.item() == 0:
                step = torch.cholesky_solve(gradient.unsqueeze(1), lower).squeeze(1)
                candidate = torch.cat([theta[:start], theta[start:] + step])
                with torch.no_grad():
                    rise = float(log_joint(candidate, latents)) - float(value)
                if rise > 0:
                    theta, damping = candidate, max(damping / 3, MIN_DAMPING)
                    rises.append(rise)
                    break
            damping *= 4
        else:
            return theta, iteration  # no step raises the log joint: stalled, judged by the caller
        progress_bar.update()
    return theta, max_iterations


def stalled(rises: deque, steps_left: int, decrement: float, tolerance: float) -> bool:
    r"""Whether the mean rise of the last :data:`STALL_WINDOW` steps, over ``steps_left`` more, falls short of the rise
    :math:`(\delta^2 - \text{tolerance}^2)/2` still needed (module notes)."""
    return len(rises) == STALL_WINDOW and sum(rises) / STALL_WINDOW * steps_left < (decrement**2 - tolerance**2) / 2
