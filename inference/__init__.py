"""Inference for the collection's models: one ``fit`` entry point, one ``Posterior`` type."""

import warnings

# arviz 0.23 announces its 1.x refactor (a FutureWarning, once a day) when first imported; 1.x needs
# Python >= 3.12 and is not used here. Every module of bnn.inference runs this first, so this is the
# package's first import of arviz, and the warning filters of the process are left as they were.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
    import arviz
# arviz 0.23 switches to numba code paths when numba is installed (the NUTS kernel needs it), and its numba MCSE
# of one chain fails under numpy 2 ("only 0-dimensional arrays can be converted"): keep arviz on its numpy paths
arviz.Numba.disable_numba()

from bnn.inference.core.posterior import Posterior  # noqa: E402
from bnn.inference.core.prediction import Prediction  # noqa: E402
from bnn.inference.fit import METHODS, fit  # noqa: E402

__all__ = ["METHODS", "Posterior", "Prediction", "fit"]
