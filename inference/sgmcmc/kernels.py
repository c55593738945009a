r"""The update rules: one step of SGLD, pSGLD or SGHMC from the gradient of the minibatch log joint.

With :math:`g_t = \nabla_z\log\hat\pi(z_t)` (:mod:`bnn.inference.sgmcmc.potential`, an unbiased estimate of the
gradient of the log posterior in the unconstrained space), step size :math:`\epsilon_t` and
:math:`\xi_t \sim \mathcal{N}(0, I)`:

SGLD (Welling & Teh 2011)
    :math:`z_{t+1} = z_t + \tfrac{\epsilon_t}{2} g_t + \sqrt{\epsilon_t}\,\xi_t`, the Euler step of the Langevin
    diffusion whose stationary law is the posterior. For a Gaussian posterior of precision :math:`\Lambda` and
    full batches the chain's stationary law is Gaussian with the exact mean and the covariance
    :math:`\Lambda^{-1}(I - \epsilon\Lambda/4)^{-1}` (stable for :math:`\epsilon < 4/\lambda_{max}(\Lambda)`).
pSGLD (Li et al. 2016)
    :math:`V_t = \alpha V_{t-1} + (1 - \alpha)\,\bar g_t^2` with :math:`\bar g_t = g_t / N` (the per-datum scale;
    :math:`V_0 = \bar g_0^2`), :math:`G = 1/(\lambda + \sqrt{V})` elementwise, and
    :math:`z_{t+1} = z_t + \tfrac{\epsilon_t}{2} G g_t + \sqrt{\epsilon_t G}\,\xi_t`. :math:`V` adapts during the
    burn-in only and is frozen for the draws: with a constant :math:`G` the drift term
    :math:`\Gamma = \nabla\cdot G` that Li et al. drop is zero, so the draws come from preconditioned Langevin
    dynamics with no bias beyond the discretisation.
SGHMC (Chen et al. 2014, their eq. 15 with :math:`\hat\beta = 0`)
    :math:`v_{t+1} = (1 - \alpha) v_t + \eta_t g_t + \sqrt{2\alpha\eta_t}\,\xi_t`,
    :math:`z_{t+1} = z_t + v_{t+1}`, with learning rate :math:`\eta_t` (the step size) and friction
    :math:`\alpha`: Hamiltonian dynamics with unit mass, time step :math:`h = \sqrt{\eta}` and friction
    :math:`C = \alpha/h`, :math:`v = h\,p`. The momentum starts at :math:`v_0 \sim \mathcal{N}(0, \eta_0 I)` and is
    rescaled by :math:`\sqrt{\eta_{t+1}/\eta_t}` when a schedule changes :math:`\eta` (so :math:`p` keeps its
    scale). For a Gaussian posterior the variance along an eigenvalue :math:`\lambda` is
    :math:`\lambda^{-1}\big(1 - \eta\lambda / (2(2 - \alpha))\big)^{-1}` (stable for :math:`\eta\lambda < 2(2 - \alpha)`).

An exploring step (``explore=True``, the first part of a cyclical chain's cycle, :mod:`bnn.inference.sgmcmc.step_plans`)
is the same update without the noise :math:`\xi_t`: gradient ascent on the log joint (with momentum for SGHMC).
"""

from __future__ import annotations

import torch


class SGLDKernel:
    """SGLD, or pSGLD with ``precondition_decay`` set (see the module notes)."""

    overflow_advice = ""
    """What else helps against an overflow, after a smaller step."""

    def __init__(self, num_data: int, precondition_decay: float | None = None, precondition_epsilon: float = 1e-5) -> None:
        self.num_data = num_data
        self.decay, self.epsilon = precondition_decay, precondition_epsilon
        self.second_moment: torch.Tensor | None = None

    def start(self, z: torch.Tensor, step_size: torch.Tensor) -> None:
        """Nothing to draw: SGLD's state is the position."""

    def preconditioner(self) -> torch.Tensor | float:
        r""":math:`G`, ``(C, D)`` (1 without preconditioning)."""
        if self.second_moment is None:
            return 1.0
        return 1.0 / (self.epsilon + self.second_moment.sqrt())

    def step(self, z: torch.Tensor, gradient: torch.Tensor, step_size: torch.Tensor, *, adapt: bool,
             explore: bool = False) -> torch.Tensor:
        """The next position from ``z`` ``(C, D)`` with ``gradient`` at it and each chain's step size ``(C, 1)``;
        ``adapt`` updates :math:`V` (burn-in only), ``explore`` leaves out the noise."""
        if self.decay is not None and adapt:
            mean_square = (gradient / self.num_data) ** 2
            self.second_moment = mean_square if self.second_moment is None else torch.lerp(
                mean_square, self.second_moment, self.decay)
        gain = self.preconditioner()
        drift = z + 0.5 * step_size * gain * gradient
        return drift if explore else drift + (step_size * gain) ** 0.5 * torch.randn_like(z)


class SGHMCKernel:
    """SGHMC with friction ``friction`` (see the module notes)."""

    overflow_advice = ", or raise friction (the velocity carries an overshoot on for about 1/friction steps)"
    """What else helps against an overflow, after a smaller step."""

    def __init__(self, friction: float) -> None:
        self.friction = friction
        self.velocity: torch.Tensor | None = None
        self.last_step_size: torch.Tensor | None = None

    def start(self, z: torch.Tensor, step_size: torch.Tensor) -> None:
        r""":math:`v_0 \sim \mathcal{N}(0, \eta_0 I)`, the stationary momentum."""
        self.velocity = step_size**0.5 * torch.randn_like(z)
        self.last_step_size = step_size

    def step(self, z: torch.Tensor, gradient: torch.Tensor, step_size: torch.Tensor, *, adapt: bool,
             explore: bool = False) -> torch.Tensor:
        """The next position from ``z`` ``(C, D)`` with ``gradient`` at it and each chain's step size ``(C, 1)``
        (``adapt`` is unused); ``explore`` leaves out the noise."""
        velocity = self.velocity
        if not torch.equal(step_size, self.last_step_size):
            velocity = velocity * (step_size / self.last_step_size) ** 0.5
        self.velocity = (1 - self.friction) * velocity + step_size * gradient
        if not explore:
            self.velocity = self.velocity + (2 * self.friction * step_size) ** 0.5 * torch.randn_like(z)
        self.last_step_size = step_size
        return z + self.velocity

