"""Inference for the collection's models: one ``fit`` entry point, one ``Posterior`` type."""

import warnings

# arviz 0.23 announces its 1.x refactor on import; 1.x needs Python >= 3.12 and is not used here
warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)

from bnn.inference.fit import METHODS, fit  # noqa: E402
from bnn.inference.posterior import Posterior  # noqa: E402
from bnn.inference.prediction import Prediction  # noqa: E402

__all__ = ["METHODS", "Posterior", "Prediction", "fit"]
