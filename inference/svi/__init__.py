"""Stochastic variational inference: maximise the ELBO over a guide's parameters (:func:`fit_svi`)."""

from bnn.inference.svi.fit import fit_svi

__all__ = ["fit_svi"]
