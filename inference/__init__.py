"""Inference for the collection's models: one ``fit`` entry point, one ``Posterior`` type."""

from inference.fit import METHODS, fit
from inference.posterior import Posterior
from inference.prediction import Prediction

__all__ = ["METHODS", "Posterior", "Prediction", "fit"]
