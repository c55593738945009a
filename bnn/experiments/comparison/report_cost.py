r"""What ``compare``'s report will cost, said before the fits, as their cost is (:mod:`bnn.inference.evaluation.cost`).

The report (:func:`~bnn.experiments.comparison.report.write_comparison`) evaluates every fit at each of its draws on every
training and test row (the metrics, the pointwise log-likelihood and a simulated data set for ArviZ, PSIS-LOO, WAIC,
the netCDF file), then draws its figures. Its time for fits :math:`f = 1, \dots, k` of :math:`S_f` draws on
:math:`n` rows is taken as

.. math::

    T = \sum_{f=1}^{k} \bigl[a + n\,(\alpha + \beta S_f)\bigr] + u\,(F_0 + F_1 k),

where :math:`a` is a fit's fixed cost, :math:`\alpha` a row's (PSIS fits a tail per row), :math:`\beta` a row's at
each draw (the network's forward pass, the sorting), and :math:`u` the time of one small figure saved as the report
saves its figures (timed once in a process). The others are measured here, on the model and data at hand, in two
probes: the report's own evaluation (:func:`~bnn.inference.evaluation.compare.compare` and
:meth:`~bnn.inference.core.posterior.Posterior.to_netcdf`) of a posterior of :data:`FEW_DRAWS` and of more prior
draws (:data:`MORE_DRAWS`, :data:`PROBE_CELLS`) on every row (on at most :data:`PROBE_ROWS` training rows and the same
share of the test rows, their times scaled up by the rows), each timed :data:`PROBE_REPEATS` times in turn with the
other and its shortest time kept: the first gives :math:`a + n(\alpha + \beta S_1)`, their difference :math:`n\beta`.
:data:`FIGURES_FIXED` and :data:`FIGURES_PER_FIT` count the figures in units of :math:`u` (set on the main job's
report: ``benchmarks/results/estimates.md``). Not counted: the out-of-distribution scores (``--ood``) and the
conformal sets (``--conformal``).
"""

from __future__ import annotations

import functools
import math
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import pyro
import torch

from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.record import FitRecord
from bnn.inference.evaluation.compare import compare
from bnn.inference.evaluation.cost import format_seconds
from bnn.inference.evaluation.figure_files import save_figure
from bnn.runtime.timing import median_seconds

PROBE_ROWS = 10_000
"""At most this many training rows (and the same share of the test rows) in the probes; on more, their times are
scaled up by the rows (below this the time per row and draw grows with the rows: the arrays outgrow the caches)."""

FEW_DRAWS, MORE_DRAWS = 20, 100
"""The probes' draws: the difference of their times gives the time of a draw, :math:`n\\beta`; on few rows the second
probe takes more draws, up to :data:`PROBE_CELLS` rows x draws, so that the difference stands out of the timing's
noise."""

PROBE_CELLS = 200_000
"""Rows x draws of the second probe, at least (at most 1,000 draws)."""

PROBE_REPEATS = 2
"""Each probe is timed this many times, in turn with the other, and its shortest time kept: other work on the machine
lengthens a run, never shortens it. On few rows a draw costs less than the timing's noise, and the time of a draw may
come out as 0: there the fits' fixed cost is the estimate."""

FIGURE_REPEATS = 9
"""Small figures timed, their median the unit (one small figure's time varies by half from one to the next)."""

FIGURES_FIXED, FIGURES_PER_FIT = 9, 16
"""The report's figures in units of one small figure: the predictive, calibration, selective-prediction, forest and
marginal plots (their panels grow with the fits), and a trace plot per fit; fitted to the figure stages of the main
job's report with one fit and with three, timed in units of the same run."""


@dataclass(frozen=True)
class ReportEstimate:
    """The estimated time of the report, from the times measured on the probes (module notes).

    Attributes
    ----------
    draws : tuple of int
        The draws of each fit the report evaluates.
    rows : int
        Training and test rows.
    first_draws_seconds : float
        The evaluation of a fit of :data:`FEW_DRAWS` draws on every row: :math:`a + n(\\alpha + \\beta S_1)`.
    draw_seconds : float
        The evaluation of one more draw on every row: :math:`n\\beta`.
    figure_seconds : float
        One small figure, :math:`u`.
    """

    draws: tuple[int, ...]
    rows: int
    first_draws_seconds: float
    draw_seconds: float
    figure_seconds: float

    @property
    def figure_units(self) -> int:
        """The report's figures in units of one small figure."""
        return FIGURES_FIXED + FIGURES_PER_FIT * len(self.draws)

    @property
    def seconds(self) -> float:
        """Estimated wall time: each fit's evaluation and the figures."""
        evaluation = sum(max(self.first_draws_seconds + (count - FEW_DRAWS) * self.draw_seconds, 0.0) for count in self.draws)
        return evaluation + self.figure_units * self.figure_seconds

    def for_draws(self, draws: Sequence[int]) -> ReportEstimate:
        """The same measurements for fits of ``draws`` draws (the fits a time budget kept, as it lowered them)."""
        return replace(self, draws=tuple(draws))

    def describe(self) -> str:
        """One line: the estimate and how it was counted."""
        return (f"report: about {format_seconds(self.seconds)}: {len(self.draws)} fits of "
                f"{', '.join(f'{count:,}' for count in self.draws)} draws on {self.rows:,} rows, each "
                f"{self.first_draws_seconds:.2f} s at {FEW_DRAWS} draws + {self.draw_seconds * 1e3:.2f} ms a draw more "
                f"(timed on prior draws), and {self.figure_units} figure units x {self.figure_seconds:.2f} s")


def probe_posterior(model, dataset: Dataset, draws: int) -> Posterior:
    """A posterior of ``draws`` draws of ``model``'s prior (seed 0, in a generator state of its own) on ``dataset``'s
    training rows: the report can evaluate it as it evaluates a fit's."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        with pyro.plate("probe_draws", draws, dim=-1):
            values = model.squeeze_plate_slot(model.sample_latents())
    samples = {name: value.reshape(1, draws, *value.shape[1:]).to(dataset.x_train.dtype) for name, value in values.items()}
    return Posterior(model, samples, dataset.x_train, dataset.y_train, FitRecord(seed=0, train_seconds=0.0))


def _rows(dataset: Dataset, train: int, test: int) -> Dataset:
    """``dataset`` cut to its first ``train`` training and ``test`` test rows."""
    return replace(dataset, x_train=dataset.x_train[:train], y_train=dataset.y_train[:train],
                   x_test=dataset.x_test[:test], y_test=dataset.y_test[:test])


def _evaluation_seconds(model, dataset: Dataset, draws: int, folder: Path) -> float:
    """The time of the report's evaluation of a probe of ``draws`` draws on ``dataset``."""
    posterior = probe_posterior(model, dataset, draws)
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # prior draws: LOO and WAIC warn about themselves
        compare({"probe": posterior}, dataset)
        posterior.to_netcdf(folder / "probe.nc")
    return time.perf_counter() - began


@functools.cache
def figure_seconds() -> float:
    """The time of one small figure (a line of 100 points), saved as the report saves its figures; measured once in a
    process: it is the machine's and matplotlib's, whatever the model and the data."""
    with tempfile.TemporaryDirectory() as name:
        def one() -> None:
            figure, axes = plt.subplots(figsize=(4, 3))
            axes.plot(range(100), range(100))
            save_figure(figure, Path(name) / "unit.png")

        return median_seconds(one, repeats=FIGURE_REPEATS)


def estimate_report(model, dataset: Dataset, draws: Sequence[int]) -> ReportEstimate:
    """The :class:`ReportEstimate` of the report on fits of ``model`` to ``dataset`` holding ``draws`` draws each (see
    the module notes; the probes take about as long as the report's evaluation of 300 draws, or of 2,000 on few rows)."""
    train, test = len(dataset.x_train), len(dataset.x_test)
    share = min(1.0, PROBE_ROWS / train)
    probed = _rows(dataset, math.ceil(share * train), math.ceil(share * test))
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _evaluation_seconds(model, probed, FEW_DRAWS, folder)  # untimed: first imports, the arrays' first allocation
        more = min(max(MORE_DRAWS, math.ceil(PROBE_CELLS / (len(probed.x_train) + len(probed.x_test)))), 1000)
        times = [(_evaluation_seconds(model, probed, FEW_DRAWS, folder), _evaluation_seconds(model, probed, more, folder))
                 for _ in range(PROBE_REPEATS)]
    at_few, at_more = (min(column) / share for column in zip(*times))
    return ReportEstimate(tuple(draws), train + test, at_few, max(at_more - at_few, 0.0) / (more - FEW_DRAWS),
                          figure_seconds())
