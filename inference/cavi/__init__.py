r"""Closed-form mean-field variational inference (CAVI) for Bayesian linear regression with unknown noise precision.

Not a method of ``fit`` (the model is the conjugate Normal-Gamma regression, not a network):
``fit_cavi(x, y, prior) -> CAVIResult``, with the exact posterior beside it
(``exact_posterior(x, y, prior) -> NormalGammaPosterior``) to measure what the factorisation loses, and the
model as a Pyro program (``normal_gamma_regression``) with SVI in the same family (``fit_svi``) for comparison.
"""

from bnn.inference.cavi.elbo import meanfield_elbo
from bnn.inference.cavi.exact import NormalGammaPosterior, exact_posterior
from bnn.inference.cavi.fit import CAVIResult, fit_cavi
from bnn.inference.cavi.model import normal_gamma_regression
from bnn.inference.cavi.prior import NormalGammaPrior
from bnn.inference.cavi.svi import SVIResult, fit_svi, meanfield_guide

__all__ = [
    "CAVIResult", "NormalGammaPosterior", "NormalGammaPrior", "exact_posterior", "fit_cavi", "meanfield_elbo",
    "normal_gamma_regression", "SVIResult", "fit_svi", "meanfield_guide",
]
