"""Evaluating fits: test metrics, the comparison table and ranking, plots and the Markdown report."""

from bnn.inference.evaluation.compare import compare, rank
from bnn.inference.evaluation.conformal import ConformalPredictor, conformalize
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.evaluation.report import write_comparison

__all__ = ["ConformalPredictor", "compare", "conformalize", "evaluate", "rank", "write_comparison"]
