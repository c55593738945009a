"""The Laplace approximation: a Gaussian at the MAP with the curvature as precision (:func:`fit_laplace`)."""

from bnn.inference.laplace.fit import fit_laplace

__all__ = ["fit_laplace"]
