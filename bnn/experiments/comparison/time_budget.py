r"""``compare --time-budget``: the draws and steps each method can afford, or the reason it is left out.

The budget :math:`B` less the report's estimate (:mod:`bnn.experiments.comparison.report_cost`: the metrics, LOO, WAIC,
the netCDF files and the figures, for the draws each fit holds as asked) is spent on the fits by their cost estimates
(:mod:`bnn.inference.evaluation.cost`). Methods of fixed length (Laplace, the MAP, an ensemble)
are counted as they are, by their expected cost (their polish can take several times longer on large data or a ReLU
network); methods whose length is a number of draws or steps (NUTS, SVI, MC dropout, SG-MCMC) share
what is left, each scaled by the same factor :math:`f = \text{left} / \sum \text{cost}` when :math:`f < 1`, but never
below each method's floors (:attr:`~bnn.inference.core.method.Method.budget_floors`), nor below what the user asked
for: NUTS keeps two chains and at least 100 warm-up and 100 kept draws per chain, so that split R-hat and bulk ESS
still mean something; SVI at least 1,000 steps. A length left to its data-dependent default (SVI's and MC dropout's
``steps`` unset) counts as fixed. A method whose smallest run does not fit is left out, most expensive
first, with the reason. The NUTS estimate counts every tree at full depth (the most gradients) but not the sampler's
work between them: on a network as small as toy1d's, whose trees do reach full depth, that work is of the order of the
gradients' own time, so a NUTS run chosen here can overrun its share; leave that margin in the budget."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from bnn.experiments.comparison.report_cost import ReportEstimate, estimate_report
from bnn.inference.evaluation.cost import CostEstimate, estimate_cost, format_seconds, gradient_count
from bnn.inference.fit import METHODS, prepare_data

RESCALE_ATTEMPTS = 8
"""How often :func:`plan` shrinks the factor again when floors keep the scaled cost above what is left."""

LONG_RUN = 15 * 60
"""Seconds of estimated fitting above which ``compare`` without a budget warns and suggests one."""

UNITS = {"s": 1, "m": 60, "h": 3600}
DURATION = re.compile(r"(?:\d+(?:\.\d+)?[hms])+")


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``10m``, ``1h`` or ``1h30m``; ``ValueError`` naming the format for anything else."""
    compact = text.strip().lower()
    if not DURATION.fullmatch(compact):
        raise ValueError(f"--time-budget takes a duration such as 90s, 10m, 1h or 1h30m, got {text!r}")
    seconds = sum(float(number) * UNITS[unit] for number, unit in re.findall(r"(\d+(?:\.\d+)?)([hms])", compact))
    if seconds <= 0:
        raise ValueError(f"--time-budget must be longer than zero, got {text!r}")
    return seconds


@dataclass(frozen=True)
class Choice:
    """What the budget decided for one fit.

    Attributes
    ----------
    method : str
        The method.
    options : dict
        Its fit options, with what the budget lowered.
    estimate : CostEstimate or None
        The cost of those options (``None``: no estimate for this method; it runs as asked).
    note : str or None
        What the budget changed, or why the method is left out.
    skipped : bool
        Left out: even its smallest run does not fit.
    """

    method: str
    options: dict[str, Any]
    estimate: CostEstimate | None
    note: str | None = None
    skipped: bool = False


@dataclass(frozen=True)
class RunPlan:
    """The fits ``compare`` runs and the report after them.

    Attributes
    ----------
    fits : list of Choice
        Each fit, in the order asked, with its estimate and what a budget did to it.
    report : ReportEstimate
        The report's estimated time.
    """

    fits: list[Choice]
    report: ReportEstimate


def floors_of(method: str) -> dict[str, int]:
    """The options a budget may lower for ``method``, each with its floor
    (:attr:`~bnn.inference.core.method.Method.budget_floors`)."""
    return dict(METHODS.get(method).budget_floors)


def _seconds(choice: Choice) -> float:
    return 0.0 if choice.estimate is None or choice.skipped else choice.estimate.seconds


def _rescaled(choice: Choice, parsed, factor: float, rows: int) -> Choice:
    """``choice`` with every option of its method's floors scaled by ``factor`` (not below its floor, nor raised)."""
    floors = floors_of(choice.method)
    lowered = {name: min(getattr(parsed, name), max(floor, math.floor(getattr(parsed, name) * factor)))
               for name, floor in floors.items()}
    count = gradient_count(choice.method, replace(parsed, **lowered), rows)
    estimate = replace(choice.estimate, gradients=count.gradients, how=count.how)
    changed = [f"{name} {getattr(parsed, name)} -> {value}" for name, value in lowered.items() if value != getattr(parsed, name)]
    note = f"lowered to fit the time budget: {', '.join(changed)} (about {format_seconds(estimate.seconds)})" if changed else None
    return replace(choice, options={**choice.options, **lowered}, estimate=estimate, note=note)


def plan(choices: list[Choice], parsed: list, budget: float, rows: int, report_seconds: float) -> list[Choice]:
    """The fits ``compare`` runs within ``budget`` seconds (see the module docstring).

    Parameters
    ----------
    choices : list of Choice
        Each fit as asked, with its :class:`CostEstimate` (or ``None``).
    parsed : list of Options
        Each fit's parsed options (their defaults filled in), in the same order.
    budget : float
        Seconds for the whole command.
    rows : int
        Training examples (SVI without ``steps`` runs its epochs over them).
    report_seconds : float
        The report's estimated time, kept out of the budget.

    Returns
    -------
    list of Choice
        The same fits, with lowered options, a note, or ``skipped`` and the reason.
    """
    left = budget - report_seconds
    fixed = [i for i, c in enumerate(choices) if c.estimate is None or not floors_of(c.method)
             or any(getattr(parsed[i], name) is None for name in floors_of(c.method))]
    scalable = [i for i in range(len(choices)) if i not in fixed]
    decided = list(choices)
    for i in sorted(fixed, key=lambda i: _seconds(choices[i])):
        if _seconds(choices[i]) > left:
            decided[i] = replace(choices[i], skipped=True, note=(
                f"left out: its estimate, {format_seconds(_seconds(choices[i]))}, exceeds what the time budget leaves "
                f"({format_seconds(left)})"))
        left -= _seconds(decided[i])
    while scalable:
        factor = min(1.0, left / sum(_seconds(choices[i]) for i in scalable))
        for _ in range(RESCALE_ATTEMPTS):  # options held at their floor keep the cost above factor x cost: shrink again
            for i in scalable:
                decided[i] = _rescaled(choices[i], parsed[i], factor, rows) if factor < 1 else choices[i]
            spent = sum(_seconds(decided[i]) for i in scalable)
            if spent <= left:
                break
            factor *= left / spent
        if spent <= left:
            break
        dearest = max(scalable, key=lambda i: _seconds(decided[i]))
        decided[dearest] = replace(decided[dearest], skipped=True, note=(
            f"left out: its smallest run ({', '.join(f'{k} {v}' for k, v in floors_of(choices[dearest].method).items())}), "
            f"about {format_seconds(_seconds(decided[dearest]))}, does not fit in the time budget's {format_seconds(left)} "
            f"beside the other methods; raise --time-budget"))
        scalable.remove(dearest)
    return decided


def draws_of(methods: list[str], parsed: list) -> list[int]:
    """The draws each fit's posterior will hold (:attr:`~bnn.inference.core.cost_model.CostModel.draws`), for the
    methods with a cost model."""
    return [METHODS.get(method).cost.draws(options) for method, options in zip(methods, parsed)
            if METHODS.get(method).cost is not None]


def choose_fits(model, dataset, methods: list[str], routed: list[dict[str, Any]], budget: float | None) -> RunPlan:
    """Each fit of ``compare`` with its cost estimate on ``dataset``'s training split, the report's estimate and,
    under a ``budget`` in seconds (less the time these estimates took), what :func:`plan` lowered or left out (bad
    options fail here, before any work, as in ``fit``)."""
    began = time.perf_counter()
    x, y = prepare_data(model, dataset)
    parsed = [METHODS.get(method).parse(options, model) for method, options in zip(methods, routed)]
    timings: dict = {}
    choices = [Choice(method, options, estimate_cost(method, options_set, model, x, y, timings))
               for method, options, options_set in zip(methods, routed, parsed)]
    report = estimate_report(model, dataset, draws_of(methods, parsed))
    if budget is None:
        return RunPlan(choices, report)
    decided = plan(choices, parsed, budget - (time.perf_counter() - began), x.shape[0], report.seconds)
    kept = [choice for choice in decided if not choice.skipped]
    return RunPlan(decided, report.for_draws(draws_of([choice.method for choice in kept],
                                                      [METHODS.get(choice.method).parse(choice.options, model)
                                                       for choice in kept])))


def cost_lines(run: RunPlan, budget: float | None) -> list[str]:
    """What ``compare`` says before it starts: each fit's estimate and what the budget did to it, and the report's."""
    header = ("Estimated cost (gradients this fit needs x the time of one measured here, before the fits)"
              + (f", within --time-budget {format_seconds(budget)}:" if budget is not None else ":"))
    lines = [header]
    for choice in run.fits:
        said = choice.estimate.describe() if choice.estimate is not None else f"{choice.method}: no estimate"
        lines.append(f"- {said}" + (f"; {choice.note}" if choice.note else ""))
    lines.append(f"- {run.report.describe()}")
    total = sum(_seconds(choice) for choice in run.fits) + run.report.seconds
    if budget is None and total > LONG_RUN:
        lines.append(f"Warning: these fits and the report may take up to about {format_seconds(total)}; to bound them, "
                     "stop this run (Ctrl-C; finished fits are kept) and give --time-budget, for example --time-budget 30m.")
    return lines
