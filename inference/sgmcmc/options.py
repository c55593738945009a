r"""The options of the SG-MCMC samplers (SGLD, pSGLD, SGHMC, cSGLD, cSGHMC), validated when they are built.

The step that suits a posterior is set by its curvature: a gradient step is stable along the stiffest direction of
the negative log joint's Hessian only for :math:`\epsilon\lambda_{max} < 4` (SGLD; :math:`\eta\lambda_{max} <
2(2 - \alpha)` for SGHMC, :mod:`bnn.inference.sgmcmc.kernels`), and :math:`\lambda_{max}` grows with the data size
and the noise precision, by orders of magnitude from toy1d (100 rows) to UCI yacht (277 nearly noiseless rows). A
fixed step that suits one set overflows on another, or runs too hot. So by default each chain starts at its own MAP
(``init="map"``, a learned noise at the MAP network's RMS residual) and takes :math:`\epsilon_0 = s/\lambda_{max}`
there (``step_share`` :math:`s`; a cyclical chain measures again where each cycle restarts); the variance along
the stiffest eigenvector of a Gaussian posterior is then :math:`(1 - s/4)^{-1}` of the posterior's for SGLD and
:math:`(1 - s/(2(2 - \alpha)))^{-1}` for SGHMC (4/3 and 1.07 at the defaults), less along the others.

Defaults, chosen on toy1d against NUTS there (``benchmarks/results/sgmcmc_steps/results.md``; other shares and pSGLD
in the files beside it):

* SGLD, :math:`s = 1`, 2,000 burn-in steps from the MAP, 1,000 draws thinned by 10.
* SGHMC, :math:`s = 0.25`, friction 0.05, the same plan: NUTS's test log-likelihood there.
* cSGLD, :math:`s = 2`, 4 cycles of 5,000 steps, the first 80% of each exploring, 400 draws per chain. From a MAP a
  cycle's exploration stays in its mode, and the sampling part's shrinking steps barely move: narrower than NUTS.
* pSGLD (``precondition="rmsprop"``) keeps its fixed :math:`10^{-5}`: its gain :math:`G \approx N/\sqrt{\text{curvature}}`
  scales the step itself.

The chains do not mix between the modes their MAP fits found: their predictive R-hat stays above 1.01 on toy1d (the
chains disagree in the gap between the clusters), and the convergence warning says so. On UCI split 0 (``bnn uci``,
the papers' 50 ReLU units) see ``benchmarks/results/uci.md``.

SGHMC's velocity carries an overshoot on for about :math:`1/\alpha` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from bnn.inference.core.full_batch_work import regime_rows
from bnn.inference.core.temperature import UNTEMPERED, parse_temperature
from bnn.inference.map_search.map_options import MapFitOptions
from bnn.inference.map_search.map_starts import MemberMethod, member_workers
from bnn.inference.sgmcmc.step_plans import BurnInPlan, CyclicalPlan

from bnn.options import choice, flag, integer, number, option, optional, positive_number, probability, seed
from bnn.runtime.memory import parameter_count, value_bytes

MIN_SAMPLES = 4  # split R-hat and ESS need at least 4 draws per chain
STABLE_SHARE = 4.0
r"""SGLD's step :math:`\epsilon` is stable along an eigenvalue :math:`\lambda` of the negative log joint's Hessian only
for :math:`\epsilon\lambda < 4` (:mod:`bnn.inference.sgmcmc.kernels`); SGHMC's for :math:`\eta\lambda < 2(2 - \alpha)`."""
PSGLD_STEP_SIZE = 1e-5
"""pSGLD's step when none is given: its gain scales the step to the curvature itself (chosen on toy1d:
``benchmarks/results/sgmcmc_steps/psgld/results.md``)."""


class ChainStart(str, Enum):
    """Where each chain starts."""

    MAP = "map"
    """Its own MAP fit (:mod:`bnn.inference.map_search.map_starts`: Adam, then a polish, from its own prior draw);
    the step size is set from the curvature there."""
    PRIOR = "prior"
    """A prior draw of the weights, the likelihood's latents at their most likely values given them
    (:meth:`~bnn.inference.sgmcmc.potential.MinibatchLogJoint.start`); needs a given ``step_size``."""


class StepSchedule(str, Enum):
    r"""How the step size changes with the step :math:`t` (warmup included)."""

    CONSTANT = "constant"
    r""":math:`\epsilon_t = \epsilon_0`: the chain has one stationary distribution, the draws are equally weighted."""
    POLYNOMIAL = "polynomial"
    r"""Welling & Teh's :math:`\epsilon_t = a(b + t)^{-\gamma}` with :math:`a = \epsilon_0 b^\gamma`, so
    :math:`\epsilon_t = \epsilon_0 (1 + t/b)^{-\gamma}`: ``decay_offset`` is :math:`b`, ``decay_power`` :math:`\gamma`."""


class Preconditioner(str, Enum):
    """SGLD's preconditioner."""

    NONE = "none"
    """Plain SGLD (Welling & Teh 2011)."""
    RMSPROP = "rmsprop"
    r"""pSGLD (Li et al. 2016): the diagonal :math:`G = 1 / (\lambda + \sqrt{V})` of an RMSprop average :math:`V` of
    the squared per-datum gradient, adapted during warmup and frozen for the draws."""


@dataclass(frozen=True)
class SGMCMCOptions(MapFitOptions):
    r"""Options every SG-MCMC sampler takes (:func:`~bnn.inference.sgmcmc.fit_sgld`, :func:`~bnn.inference.sgmcmc.fit_sghmc`,
    :func:`~bnn.inference.sgmcmc.fit_csgld`): the MAP fit's
    (:class:`~bnn.inference.map_search.map_options.MapFitOptions`, for ``init="map"``) and

    Attributes
    ----------
    step_size : float, optional
        :math:`\epsilon_0`, the first step size (SGLD's :math:`\epsilon`, SGHMC's learning rate :math:`\eta`), the same
        for every chain. ``None`` (the default) sets each chain's from the curvature at its MAP start,
        :math:`\epsilon_0 = s / \lambda_{max}` with :math:`\lambda_{max}` the largest eigenvalue of the Hessian of the
        negative log joint there (:mod:`bnn.inference.sgmcmc.curvature`) and :math:`s` = ``step_share``: a fixed
        step that suits one data set overflows on a larger or less noisy one, whose curvature is larger; a share of
        :math:`1/\lambda_{max}` carries over. pSGLD's gain scales its step itself: its default is
        :data:`PSGLD_STEP_SIZE`.
    step_share : float
        :math:`s = \epsilon_0 \lambda_{max}` when ``step_size`` is ``None``, in :math:`(0, 4)`, the stability limit of
        SGLD's step (:data:`STABLE_SHARE`; SGHMC's is :math:`2(2 - \alpha)`).
    init : {"map", "prior"}
        See :class:`ChainStart`.
    map_method : {"auto", "parallel", "sequential"}
        Where the chains' MAP fits run (:class:`~bnn.inference.map_search.map_starts.MemberMethod`); the same
        starts either way.
    thin : int
        Steps per kept draw where the chain keeps draws.
    num_chains : int
        Independent chains, run side by side in one process (>= 1; R-hat needs 2).
    batch_size : int, optional
        Data points per gradient (one at least the data size: all of them); ``None``: all of them where the chains'
        full-batch gradients are cheap, else a plain training's 128 (:meth:`batch_rows`).
    temperature : float
        The likelihood temperature :math:`T`, 1 (Bayes' posterior) by default. The chains sample
        :math:`p(\mathcal{D} \mid W)^{1/T} p(W)`, :mod:`bnn.inference.core.temperature`.
    seed : int
        Seeds the chains' starts, minibatches and noise: the same seed gives the same draws.
    progress : bool
        Show a tqdm bar.
    """

    step_size: float | None = option(None, optional(positive_number))
    step_share: float = option(1.0, number(low=0.0, high=STABLE_SHARE))
    init: ChainStart = option("map", choice(ChainStart))
    map_method: MemberMethod = option("auto", choice(MemberMethod))
    thin: int = option(10, integer(minimum=1))
    num_chains: int = option(2, integer(minimum=1))
    batch_size: int | None = option(None, optional(integer(minimum=1)))
    temperature: float = option(UNTEMPERED, parse_temperature)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    longer_run: ClassVar[str] = ""
    """What makes the chains longer, in option names (the convergence warning says it)."""

    def batch_rows(self, model, rows: int) -> int:
        """The rows of a gradient on ``rows`` training rows: ``batch_size``, else the regime of
        :func:`~bnn.inference.core.full_batch_work.regime_rows` for every chain's steps (``model`` ``None``: all of
        them)."""
        if self.batch_size is not None:
            return self.batch_size
        return regime_rows(model, rows, self.num_chains * self.plan().total)

    def plan(self) -> BurnInPlan | CyclicalPlan:
        """What each step does (:mod:`bnn.inference.sgmcmc.step_plans`)."""
        raise NotImplementedError

    def hamiltonian(self) -> bool:
        """The chains run SGHMC's dynamics (with ``friction``)."""
        return False

    def fixed_step_size(self) -> float | None:
        """The step size every chain starts at, or ``None`` where each chain's comes from its curvature."""
        return self.step_size

    def workers(self) -> int:
        """The worker processes the chains' MAP fits run in (1: in this process)."""
        return member_workers(self.map_method, self.num_chains)

    def check(self) -> None:
        if self.init is ChainStart.PRIOR and self.fixed_step_size() is None:
            raise ValueError("init='prior' starts the chains away from a mode, where the curvature that sets the step "
                             "size cannot be measured: give step_size, or start at init='map'")
        limit = 2 * (2 - self.friction) if self.hamiltonian() else STABLE_SHARE
        if self.step_share >= limit:
            raise ValueError(f"step_share={self.step_share:g} is past the stability limit {limit:g} of the "
                             f"friction-{self.friction:g} dynamics, 2 (2 - friction): lower step_share")

    def memory_needs(self, model) -> dict[str, int]:
        parameters, draws = parameter_count(model), self.plan().num_samples
        needs = {f"{self.num_chains} chains' states (4 D each)": value_bytes(4 * self.num_chains * parameters),
                 f"{self.num_chains} chains x {draws} draws": value_bytes(self.num_chains * draws * parameters)}
        if self.init is ChainStart.MAP:
            needs |= self.map_fits_needs(model, self.workers(), "MAP starts")
        return needs


@dataclass(frozen=True)
class BurnInOptions(SGMCMCOptions):
    r"""Options of the samplers that burn in, then draw (SGLD, pSGLD, SGHMC): those of :class:`SGMCMCOptions` and

    Attributes
    ----------
    step_schedule : {"constant", "polynomial"}
        See :class:`StepSchedule`.
    decay_offset, decay_power : float
        :math:`b > 0` and :math:`\gamma \in (0.5, 1]` of the polynomial schedule (Welling & Teh's conditions
        :math:`\sum_t \epsilon_t = \infty`, :math:`\sum_t \epsilon_t^2 < \infty`); ignored by the constant one.
    num_warmup : int
        Burn-in steps per chain, discarded (>= 0).
    num_samples : int
        Draws kept per chain (>= 4, for split R-hat); a chain runs ``num_warmup + num_samples * thin`` steps.
    """

    step_schedule: StepSchedule = option("constant", choice(StepSchedule))
    decay_offset: float = option(1000.0, positive_number)
    decay_power: float = option(0.55, number(low=0.5, high=1.0, high_open=False))
    num_warmup: int = option(2000, integer(minimum=0))
    num_samples: int = option(1000, integer(minimum=MIN_SAMPLES))

    longer_run: ClassVar[str] = "raise num_warmup and num_samples (or thin)"

    def plan(self) -> BurnInPlan:
        return BurnInPlan(self.num_warmup, self.num_samples, self.thin,
                          polynomial=self.step_schedule is StepSchedule.POLYNOMIAL, offset=self.decay_offset,
                          power=self.decay_power)


@dataclass(frozen=True)
class SGLDOptions(BurnInOptions):
    r"""Options of :func:`~bnn.inference.sgmcmc.fit_sgld`: those of :class:`BurnInOptions` and

    Attributes
    ----------
    precondition : {"none", "rmsprop"}
        See :class:`Preconditioner`.
    precondition_decay : float
        :math:`\alpha` of the RMSprop average :math:`V \leftarrow \alpha V + (1 - \alpha)\bar g^2`, in (0, 1).
    precondition_epsilon : float
        :math:`\lambda` of :math:`G = 1/(\lambda + \sqrt{V})`, the largest gain is :math:`1/\lambda`.
    """

    precondition: Preconditioner = option("none", choice(Preconditioner))
    precondition_decay: float = option(0.99, probability)
    precondition_epsilon: float = option(1e-5, positive_number)

    def fixed_step_size(self) -> float | None:
        if self.precondition is Preconditioner.RMSPROP and self.step_size is None:
            return PSGLD_STEP_SIZE
        return self.step_size

    def check(self) -> None:
        super().check()
        if self.precondition is Preconditioner.RMSPROP and self.num_warmup < 1:
            raise ValueError("precondition='rmsprop' adapts its preconditioner during the burn-in and freezes it for the "
                             "draws: give num_warmup >= 1 (a few hundred steps)")


@dataclass(frozen=True)
class SGHMCOptions(BurnInOptions):
    r"""Options of :func:`~bnn.inference.sgmcmc.fit_sghmc`: those of :class:`BurnInOptions` and

    Attributes
    ----------
    friction : float
        :math:`\alpha \in (0, 1)`, the momentum decay per step (Chen et al.'s :math:`\eta C` over the step):
        :math:`v \leftarrow (1 - \alpha) v + \eta \nabla\log\hat\pi + \mathcal{N}(0, 2\alpha\eta)`.
    """

    step_share: float = option(0.25, number(low=0.0, high=STABLE_SHARE))
    friction: float = option(0.05, probability)

    def hamiltonian(self) -> bool:
        return True


class Dynamics(str, Enum):
    """The sampler a cyclical chain runs in the sampling part of each cycle."""

    LANGEVIN = "langevin"
    """cSGLD: SGLD's step; the exploration part is plain stochastic gradient ascent."""
    HAMILTONIAN = "hamiltonian"
    """cSGHMC: SGHMC's step with ``friction``; the exploration part is gradient ascent with momentum."""


@dataclass(frozen=True)
class CSGLDOptions(SGMCMCOptions):
    r"""Options of :func:`~bnn.inference.sgmcmc.fit_csgld` (cyclical SG-MCMC, Zhang et al. 2020): those of
    :class:`SGMCMCOptions` and

    Attributes
    ----------
    num_cycles : int
        :math:`M`, the cycles of each chain; each starts at ``step_size`` and may reach another mode.
    cycle_length : int
        :math:`L`, the steps of a cycle: a chain runs ``num_cycles * cycle_length`` steps.
    exploration : float
        :math:`\beta \in [0, 1)`, the share of each cycle that explores (no noise) before it samples.
    dynamics : {"langevin", "hamiltonian"}
        See :class:`Dynamics`: cSGLD or cSGHMC.
    friction : float
        :math:`\alpha \in (0, 1)` of the Hamiltonian dynamics (:class:`SGHMCOptions`); ignored by the Langevin one.
    """

    step_share: float = option(2.0, number(low=0.0, high=STABLE_SHARE))
    num_cycles: int = option(4, integer(minimum=1))
    cycle_length: int = option(5000, integer(minimum=2))
    exploration: float = option(0.8, number(low=0.0, high=1.0, low_open=False))
    dynamics: Dynamics = option("langevin", choice(Dynamics))
    friction: float = option(0.05, probability)

    longer_run: ClassVar[str] = "raise num_cycles or cycle_length"

    def plan(self) -> CyclicalPlan:
        return CyclicalPlan(self.num_cycles, self.cycle_length, self.exploration, self.thin)

    def hamiltonian(self) -> bool:
        return self.dynamics is Dynamics.HAMILTONIAN

    def check(self) -> None:
        super().check()
        plan = self.plan()
        if plan.num_samples < MIN_SAMPLES:
            raise ValueError(f"{self.num_cycles} cycle(s) of {self.cycle_length} steps, {self.exploration:g} of each "
                             f"exploring and a draw every {self.thin} steps of the rest, keep {plan.num_samples} draws "
                             f"per chain; R-hat needs {MIN_SAMPLES}: raise cycle_length or num_cycles, or lower "
                             "exploration or thin")
