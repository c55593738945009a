"""The continual-learning benchmark: each method learns the tasks in order and is scored on every task seen so far;
resumable, with its report (:func:`run_continual`, :func:`write_continual_report`)."""

from bnn.experiments.continual.report import forgetting, write_continual_report
from bnn.experiments.continual.run import ContinualResult, run_continual

__all__ = ["ContinualResult", "forgetting", "run_continual", "write_continual_report"]
