"""Continual learning: a sequence of tasks, the posterior of one the prior of the next (VCL, online Laplace, UCL), or
the start of the next (BGD)."""

from bnn.inference.continual.learned import Learned
from bnn.inference.continual.options import ContinualOptions
from bnn.inference.continual.report import forgetting, write_continual_report
from bnn.inference.continual.run import CONTINUAL_METHODS, ContinualResult, run_continual
from bnn.inference.continual.setup import ContinualSetup

__all__ = ["CONTINUAL_METHODS", "ContinualOptions", "ContinualResult", "ContinualSetup", "Learned", "forgetting",
           "run_continual", "write_continual_report"]
