r"""What each step of an SG-MCMC chain does: its step size, whether it adds noise, whether its position is kept.

Two plans:

Burn-in, then draws (SGLD, pSGLD, SGHMC)
    ``num_warmup`` burn-in steps (discarded; pSGLD adapts its preconditioner there), then ``num_samples * thin``
    steps keeping every ``thin``-th position. The step size :math:`\epsilon_t` is constant or Welling & Teh's
    polynomial decay :math:`\epsilon_0 (1 + t/b)^{-\gamma}`; every step adds the sampler's noise.
Cycles (cSGLD, cSGHMC; Zhang et al. 2020, "Cyclical stochastic gradient MCMC for Bayesian deep learning")
    :math:`M` cycles of :math:`L` steps. At step :math:`j` of a cycle (:math:`j = 0, \dots, L - 1`) the step size is
    their cosine schedule

    .. math::

        \epsilon_j = \frac{\epsilon_0}{2}\Big[\cos\Big(\frac{\pi j}{L}\Big) + 1\Big],

    from :math:`\epsilon_0` down to nearly zero, then back to :math:`\epsilon_0` at the next cycle's start. The
    first part of each cycle, :math:`j / L < \beta`, explores: the step has no noise (stochastic gradient ascent on
    the log joint, with momentum for cSGHMC), so a large step can carry the chain to a new mode. The rest samples: the
    sampler's own step, with its noise, at the small steps of the cycle's end; every ``thin``-th position of it is
    kept. A chain thus gives :math:`M \lfloor (L - \lceil\beta L\rceil) / \text{thin}\rfloor` draws, from up to
    :math:`M` modes.
"""

from __future__ import annotations

import math


def step_factor_at(step: int, *, polynomial: bool, offset: float, power: float) -> float:
    r""":math:`\epsilon_t / \epsilon_0`: 1 for a constant schedule, :math:`(1 + t/b)^{-\gamma}` for the polynomial one."""
    return (1.0 + step / offset) ** -power if polynomial else 1.0


class BurnInPlan:
    """Burn-in, then draws (see the module notes).

    Parameters
    ----------
    num_warmup, num_samples, thin : int
        Burn-in steps, draws kept and steps per kept draw.
    polynomial : bool
        Welling & Teh's decay (``offset`` :math:`b`, ``power`` :math:`\\gamma`) instead of a constant step.
    """

    def __init__(self, num_warmup: int, num_samples: int, thin: int, *, polynomial: bool = False,
                 offset: float = 1.0, power: float = 1.0) -> None:
        self.warmup, self.thin = num_warmup, thin
        self.polynomial, self.offset, self.power = polynomial, offset, power
        self.total = num_warmup + num_samples * thin
        self.num_samples = num_samples

    def describe(self) -> str:
        """A chain's steps, in words."""
        return f"({self.warmup} + {self.num_samples} x {self.thin})"

    def step_factor(self, step: int) -> float:
        """:math:`\\epsilon_t / \\epsilon_0` (each chain's :math:`\\epsilon_0` is set apart)."""
        return step_factor_at(step, polynomial=self.polynomial, offset=self.offset, power=self.power)

    def explores(self, step: int) -> bool:
        """Every step samples."""
        return False

    def restarts(self, step: int) -> bool:
        """No step restarts the schedule."""
        return False

    def adapts(self, step: int) -> bool:
        """A preconditioner adapts during the burn-in only."""
        return step < self.warmup

    def keeps(self, step: int) -> bool:
        return step >= self.warmup and (step - self.warmup) % self.thin == self.thin - 1


class CyclicalPlan:
    r"""Zhang et al.'s cycles (see the module notes).

    Parameters
    ----------
    num_cycles, cycle_length : int
        :math:`M` and :math:`L`.
    exploration : float
        :math:`\beta \in [0, 1)`, the share of each cycle that explores without noise.
    thin : int
        Sampling steps per kept draw.
    """

    def __init__(self, num_cycles: int, cycle_length: int, exploration: float, thin: int) -> None:
        self.cycles, self.length, self.thin = num_cycles, cycle_length, thin
        self.sampling_start = math.ceil(exploration * cycle_length)
        self.total = num_cycles * cycle_length
        self.draws_per_cycle = (cycle_length - self.sampling_start) // thin
        self.num_samples = num_cycles * self.draws_per_cycle

    def describe(self) -> str:
        """A chain's steps, in words."""
        return f"{self.cycles} cycles x {self.length}"

    def step_factor(self, step: int) -> float:
        r""":math:`\epsilon_j / \epsilon_0` (each chain's :math:`\epsilon_0` is set apart)."""
        return (math.cos(math.pi * (step % self.length) / self.length) + 1) / 2

    def explores(self, step: int) -> bool:
        return step % self.length < self.sampling_start

    def restarts(self, step: int) -> bool:
        """The first step of every cycle after the first: the large step again."""
        return step > 0 and step % self.length == 0

    def adapts(self, step: int) -> bool:
        """Nothing adapts."""
        return False

    def keeps(self, step: int) -> bool:
        into_sampling = step % self.length - self.sampling_start
        return into_sampling >= 0 and into_sampling % self.thin == self.thin - 1 \
            and into_sampling < self.draws_per_cycle * self.thin
