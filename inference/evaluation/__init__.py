"""Evaluating fits: test metrics, the comparison table and ranking, calibration, conformal sets, OOD detection,
fidelity to a reference posterior and plots. The comparison workflow that writes them into a report is
:mod:`bnn.experiments.comparison`."""

from bnn.inference.evaluation.compare import compare, rank
from bnn.inference.evaluation.conformal import ConformalPredictor, conformalize
from bnn.inference.evaluation.fidelity import fidelity
from bnn.inference.evaluation.metrics import evaluate

__all__ = ["ConformalPredictor", "compare", "conformalize", "evaluate", "fidelity", "rank"]
