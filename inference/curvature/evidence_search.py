r"""The maximum of a function of one variable on a log scale: bracketing steps, golden sections, one parabola.

Used for the Laplace evidence as a function of :math:`u = \log\lambda` (:mod:`bnn.inference.curvature.evidence`), where every
evaluation is a MAP fit, so evaluations are few:

1. **Bracket.** From :math:`u_0`, step by :data:`STEP` downhill-first (toward weaker weight decay) while the value
   rises, or the other way if the first step falls; a maximum is bracketed once a step falls again. After
   :data:`MAX_STEPS` steps each way without a fall the best end is returned, marked not bracketed.
2. **Golden sections** shrink the bracket :math:`(a, b, c)`, :math:`f(b) \ge f(a), f(c)`, to width at most
   :data:`TOLERANCE` (at most :data:`MAX_SECTIONS` of them).
3. **A parabola** through the last three points; its vertex is evaluated once (exact for a quadratic).

The result is the best point evaluated. For a unimodal function the maximiser lies inside the final bracket, so the
point returned is within :data:`TOLERANCE` of it; a function with several maxima gives the one the steps from
:math:`u_0` reach first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

STEP = math.log(4.0)
TOLERANCE = 0.1
"""Width of the final bracket in :math:`\\log\\lambda` (10%): the Laplace evidence of a network changes by well under
a nat across it."""
MAX_STEPS = 12
"""Bracketing steps each way: :math:`\\lambda` within a factor :math:`4^{12} \\approx 1.7 \\times 10^7` of the start."""
MAX_SECTIONS = 12
"""Golden sections at most (a bracket of width :math:`2\\log 4` reaches :data:`TOLERANCE` in about 7)."""
GOLDEN = (3 - math.sqrt(5)) / 2
MAX_EVALUATIONS = 2 + MAX_STEPS + MAX_SECTIONS + 1
"""Evaluations at most: the start and its first step, the bracketing steps, the sections and the vertex."""


@dataclass(frozen=True)
class SearchResult:
    """The best point evaluated and its value, the number of evaluations, and whether a maximum was bracketed."""

    point: float
    value: float
    evaluations: int
    bracketed: bool


class _Memo:
    """``function`` with its values remembered; NaN counts as :math:`-\\infty`."""

    def __init__(self, function: Callable[[float], float]) -> None:
        self.function, self.values = function, {}

    def __call__(self, point: float) -> float:
        if point not in self.values:
            value = self.function(point)
            self.values[point] = -math.inf if math.isnan(value) else value
        return self.values[point]

    def best(self, bracketed: bool) -> SearchResult:
        point = max(self.values, key=self.values.get)
        return SearchResult(point, self.values[point], len(self.values), bracketed)


def _bracket(f: _Memo, start: float) -> tuple[float, float, float] | None:
    """``(a, b, c)`` with ``a < b < c`` and ``f(b) >= f(a), f(c)``, or ``None`` when no step falls."""
    direction = -1.0 if f(start - STEP) >= f(start) else 1.0
    inner, outer = (start, start - STEP) if direction < 0 else (start - STEP, start)
    for _ in range(MAX_STEPS):
        beyond = outer + direction * STEP
        if f(beyond) < f(outer):
            a, b, c = sorted((inner, outer, beyond))
            return a, b, c
        inner, outer = outer, beyond
    return None


def _vertex(a: float, b: float, c: float, fa: float, fb: float, fc: float) -> float | None:
    """The vertex of the parabola through three points, when it is a maximum strictly inside ``(a, c)``."""
    numerator = (b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)
    denominator = (b - a) * (fb - fc) - (b - c) * (fb - fa)
    if not denominator or not all(map(math.isfinite, (fa, fb, fc))):
        return None
    vertex = b - 0.5 * numerator / denominator
    return vertex if a < vertex < c and vertex != b else None


def maximize_on_log_scale(function: Callable[[float], float], start: float) -> SearchResult:
    """Maximise ``function`` of :math:`u = \\log\\lambda` from ``start`` (module notes)."""
    f = _Memo(function)
    bracket = _bracket(f, start)
    if bracket is None:
        return f.best(bracketed=False)
    a, b, c = bracket
    for _ in range(MAX_SECTIONS):
        if c - a <= TOLERANCE:
            break
        # the new point goes into the larger of the two sections, a golden fraction of it away from b
        probe = b + GOLDEN * (c - b) if c - b > b - a else b - GOLDEN * (b - a)
        left, right = sorted((b, probe))
        if f(left) >= f(right):
            c, b = right, left
        else:
            a, b = left, right
    vertex = _vertex(a, b, c, f(a), f(b), f(c))
    if vertex is not None:
        f(vertex)
    return f.best(bracketed=True)
