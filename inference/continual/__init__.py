"""Continual learning: a sequence of tasks, the posterior of one the prior of the next (VCL, online Laplace, UCL), or
the start of the next (BGD); the methods by name in :data:`~bnn.inference.continual.methods.CONTINUAL_METHODS`. The
benchmark that runs them over a sequence is :mod:`bnn.experiments.continual`."""

from bnn.inference.continual.learned import Learned
from bnn.inference.continual.methods import CONTINUAL_METHODS
from bnn.inference.continual.options import ContinualOptions
from bnn.inference.continual.setup import ContinualSetup

__all__ = ["CONTINUAL_METHODS", "ContinualOptions", "ContinualSetup", "Learned"]
