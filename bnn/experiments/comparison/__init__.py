"""The comparison of several methods on one model and data set (:func:`run_comparison`, what ``bnn compare`` runs):
each fit's cost estimated and chosen under a time budget, each finished fit kept for a rerun, and the report that
compares them."""

from bnn.experiments.comparison.report import write_comparison
from bnn.experiments.comparison.run import MethodSpec, run_comparison

__all__ = ["MethodSpec", "run_comparison", "write_comparison"]
