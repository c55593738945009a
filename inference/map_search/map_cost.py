r"""The cost of fits centred on MAP estimates (the MAP method, Laplace, the deep ensemble), counted before they run.

Each MAP fit takes :math:`A` Adam steps, then polishes. Where an evidence search chooses the prior precision
(Laplace's default) or a learned noise (Gaussian priors; :mod:`bnn.inference.map_search.hyperparameter_search`),
it refits the MAP at each of its :math:`E` evaluations to within one posterior standard deviation of the mode: the
first refit from Adam's end, the others from the nearest refit so far; then the MAP at the values chosen is polished
to the fit's tolerance. Without a search there is one polish, from Adam's end to the tolerance. Each polish takes at
most :math:`L` iterations (``map_max_iter``, by default the polish's own:
:func:`~bnn.inference.map_search.polish.polish_budget`); an ensemble of :math:`M` members in :math:`p` processes takes
:math:`\lceil M/p \rceil` times that. The two kinds of work are timed apart, each as the fit runs it, in float64
(:func:`adam_step_seconds`, :func:`polish_iteration_seconds`): a polish iteration (a Gauss-Newton matrix and its
solve, or an L-BFGS iteration's line search) costs several to tens of Adam steps.

The **worst case** is :math:`A + L(1 + E_{\max})` with :math:`E_{\max}` the search's most evaluations. The
**expected** figure is :math:`A + P_1 + (E - 1) P_r + P_f` with a search (:math:`E` = :data:`EXPECTED_EVALUATIONS`),
:math:`A + \min(L, P_1 + P_f)` without, each term at most :math:`L`: the iterations of the first refit, of each later
one and of the final polish (:class:`PolishCounts`), typical of smooth networks (:data:`SMOOTH_POLISH`) and of ReLU
ones (:data:`KINKED_POLISH`), whose polish goes on with L-BFGS after a kink. A smooth network's refits grow with the
training rows :math:`n`: they stop within one posterior standard deviation of the mode, which shrinks as
:math:`1/\sqrt{n}`, so the way from Adam's end (the first) or from the neighbouring mode (the others), counted in those
standard deviations, grows as :math:`\sqrt{n}`; the final polish stops at a Newton decrement, which has no scale, and
its count does not grow:

.. math::

    P_1 = P_1^{(0)} \sqrt{n / n_0},\qquad P_r = P_r^{(0)} \sqrt{n / n_0},\qquad P_f = P_f^{(0)},

with :math:`n_0` = :attr:`PolishCounts.rows`.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import pyro
import torch
from bnn.guides.flat_weights import join_sites, num_weights
from bnn.inference.core.cost_model import NUM_SAMPLES, CostModel, GradientCount
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.curvature.evidence_search import GOLDEN, MAX_EVALUATIONS, STEP, TOLERANCE
from bnn.inference.curvature.gauss_newton import uses_gauss_newton
from bnn.inference.map_search.log_joint import ScaledPrior, evidence_possible
from bnn.inference.map_search.map_estimate import MAP_LR, working_data
from bnn.inference.map_search.polish import MapProblem, adam_steps, polish_budget

from bnn.options import Options
from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.timing import median_seconds

EXPECTED_EVALUATIONS = 3 + math.ceil(math.log(TOLERANCE / (2 * STEP)) / math.log(1 - GOLDEN)) + 1
r"""The evidence search's evaluations when the maximum lies within one step of its start: the start and the two
points that bracket it, the golden sections that shrink a bracket of width :math:`2 \times` ``STEP`` to
``TOLERANCE`` (7), and the parabola's vertex: 11."""


@dataclass(frozen=True)
class PolishCounts:
    """Typical polish iterations of a MAP fit, by polish: the evidence search's first refit (from Adam's end), each
    later refit (from the nearest refit so far) and the final polish to the fit's tolerance; the counts at ``rows``
    training rows, scaled to other sizes by :meth:`at`, or the same at every size (``rows`` ``None``)."""

    first: int
    refit: int
    final: int
    rows: int | None = None

    def at(self, rows: int) -> PolishCounts:
        r"""The counts on ``rows`` training rows: the first refit and the later ones scaled by
        :math:`\sqrt{\text{rows} / n_0}` (the module's notes), the final polish as it is."""
        if self.rows is None:
            return self
        growth = math.sqrt(rows / self.rows)
        return PolishCounts(round(self.first * growth), max(1, round(self.refit * growth)), self.final, rows)


SMOOTH_POLISH = PolishCounts(first=43, refit=7, final=134, rows=100)
r"""Smooth networks, at 100 training rows: typical counts of a Laplace fit of the tanh network, the first refit's and
each later one's divided by their growth :math:`\sqrt{n / 100}`, the final polish's as they are (counted on toy1d and
five UCI sets: ``benchmarks/results/estimates.md``). A single fit may take several times the total, or a fraction."""
KINKED_POLISH = PolishCounts(first=1000, refit=250, final=70)
"""ReLU networks, whose Levenberg-Marquardt hands over to L-BFGS at a kink: the first refit runs to the default budget
of 1,000 iterations, each later one takes about 250 and the final polish about 70 (counted on UCI yacht's and Boston's
ReLU fits). Not scaled with the rows: counts on two sizes say nothing of a trend."""
TIMED_ADAM_STEPS = 20
TIMED_POLISH_ITERATIONS = 3
TIMED_RUNS = 5
"""Timed runs of each unit, their median taken: one run of a few dozen milliseconds is at the mercy of whatever else
the machine does then."""


def map_fits_count(options: Options, model, rows: int, *, members: int = 1, parallel: int = 1,
                   tuned: bool = False) -> GradientCount:
    """The expected and worst-case work of ``members`` MAP fits under ``options`` (``map_steps``, and ``map_max_iter``
    where the method has it, else the polish's own budget) on ``rows`` training rows; ``tuned``: the evidence chooses
    the prior precision; ``model`` tells whether it chooses a learned noise too, whether its network has kinks
    (:meth:`~bnn.models.network.BayesianNetwork.has_kinks`: :data:`KINKED_POLISH`, else :data:`SMOOTH_POLISH`, also
    without a ``model``) and whether its polish is Levenberg-Marquardt (else L-BFGS, with a larger default budget where
    the network is smooth: :func:`~bnn.inference.map_search.polish.polish_budget`)."""
    dense = model is None or uses_gauss_newton(model, rows, num_weights(model.sites))
    kinked = model is not None and model.has_kinks()
    budget = polish_budget(getattr(options, "map_max_iter", None), dense, kinked)
    learned_noise = model is not None and bool(model.likelihood.latent_priors()) and evidence_possible(model, 0)
    searched = tuned or learned_noise
    typical = (KINKED_POLISH if kinked else SMOOTH_POLISH).at(rows)
    if searched:
        first, refit, final = (min(budget, count) for count in (typical.first, typical.refit, typical.final))
        expected = first + (EXPECTED_EVALUATIONS - 1) * refit + final
        how = (f"{first} + {EXPECTED_EVALUATIONS - 1} x {refit} + {final} polish iterations (the evidence search's "
               f"first refit, its other {EXPECTED_EVALUATIONS - 1} of about {EXPECTED_EVALUATIONS}, at most "
               f"{MAX_EVALUATIONS}, and the final polish; at most {budget} each)")
    else:  # one polish, from Adam's end to the tolerance
        expected = min(budget, typical.first + typical.final)
        how = f"{expected} polish iterations (at most {budget})"
    # members run in whole rounds of `parallel` processes: 5 members in 2 processes take 3 members' time
    rounds = math.ceil(members / parallel)
    spread = f", in {rounds} rounds of {parallel} processes" if members % parallel else ""
    fits = rounds * parallel
    return GradientCount(
        fits * options.map_steps, parallel, "expected", f"{members} x ({options.map_steps} Adam steps; {how}){spread}",
        polish=fits * expected, polish_at_most=fits * budget * (1 + MAX_EVALUATIONS if searched else 1))


def _timed_model(model):
    """``model``, or for a network with hierarchical priors a copy with Gaussian priors in their place (its weights
    have no prior of their own to draw from): the same network, weights and data, and the prior's share of the work is
    small."""
    if not model.hierarchical_sites:
        return model
    stand_in = snapshot_model(model)
    stand_in.prior = "gaussian"
    return stand_in


def _problem(model, x: torch.Tensor, y: torch.Tensor, max_iter: int) -> tuple[MapProblem, torch.Tensor, ScaledPrior, dict]:
    """A MAP problem on ``(x, y)`` in :data:`~bnn.inference.map_search.map_estimate.WORKING_DTYPE` (float64, as
    every MAP fit works whatever the data's dtype: float32 units took 0.4-0.6 of the time on 7,373 rows) at a draw of
    the prior (seed 0), its prior and the likelihood's latents held at 1."""
    x, y = working_data(x, y)
    prior = ScaledPrior(model, 1.0)
    with seeded(0):
        theta = join_sites(model.sites, {name: d.sample() for name, d in prior.distributions.items()}).to(x.dtype)
    problem = MapProblem(model, x, y, 0, max_iter)
    problem.bar = progress_bar(enabled=False)
    return problem, theta, prior, {name: torch.ones((), dtype=x.dtype) for name in model.likelihood.latent_priors()}


def adam_step_seconds(model, x: torch.Tensor, y: torch.Tensor, options=None) -> float:
    """The wall time of one of the MAP fit's Adam steps on ``(x, y)`` as :func:`find_map` takes them (distribution
    checks off, the step's loss read back): the median of :data:`TIMED_RUNS` runs of :data:`TIMED_ADAM_STEPS`, after an
    untimed one, over the steps."""
    problem, theta, prior, latents = _problem(_timed_model(model), x, y, 1)
    with pyro.validation_enabled(False):
        run = median_seconds(lambda: adam_steps(problem, theta, prior, latents, {}, TIMED_ADAM_STEPS, MAP_LR, False),
                             repeats=TIMED_RUNS)
    return run / TIMED_ADAM_STEPS


def polish_iteration_seconds(model, x: torch.Tensor, y: torch.Tensor, options=None) -> float:
    """The wall time of one iteration of the MAP fit's polish on ``(x, y)``: the median over :data:`TIMED_RUNS` polishes
    of :data:`TIMED_POLISH_ITERATIONS` iterations from a draw of the prior, after an untimed one, of their time per
    iteration (a Levenberg-Marquardt step where the polish is Levenberg-Marquardt: it costs more than an iteration of
    the L-BFGS that takes over at a kink)."""
    model = _timed_model(model)

    def per_iteration() -> float:
        problem, theta, prior, latents = _problem(model, x, y, TIMED_POLISH_ITERATIONS)
        began = time.perf_counter()
        problem.polish(theta, prior, lambda w: latents, {}, tolerance=0.0)
        return (time.perf_counter() - began) / max(problem.iterations, 1)

    with pyro.validation_enabled(False):
        per_iteration()
        return statistics.median(per_iteration() for _ in range(TIMED_RUNS))


def map_cost_model(count, draws=NUM_SAMPLES) -> CostModel:
    """The :class:`~bnn.inference.core.cost_model.CostModel` of a MAP-centred method whose work ``count`` gives
    (:func:`map_fits_count`): Adam steps and polish iterations, each timed as the fit takes them; ``draws(options)`` is
    the draws its posterior holds (by default ``options.num_samples``, as for every cost model)."""
    return CostModel(count, adam_step_seconds, "map adam step", unit="Adam steps", polish_seconds=polish_iteration_seconds,
                     draws=draws)
