"""Inference for the collection's models: one ``fit`` entry point, one ``Posterior`` type."""

from bnn.inference.core.posterior import Posterior
from bnn.inference.core.prediction import Prediction
from bnn.inference.fit import METHODS, fit

__all__ = ["METHODS", "Posterior", "Prediction", "fit"]
