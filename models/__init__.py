"""Bayesian neural networks as Pyro programs: networks, priors on weights, likelihoods."""

from bnn.models.activations import ACTIVATIONS
from bnn.models.likelihoods import (
    LIKELIHOODS,
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    Likelihood,
    get_likelihood,
)
from bnn.models.mlp import DATA_PLATE, OBSERVED_SITE, BayesianMLP
from bnn.models.multihead import MultiHeadMLP
from bnn.models.posterior_prior import PosteriorPrior
from bnn.models.prior_predictive import prior_function_draws
from bnn.models.priors import (
    PRIORS,
    GaussianPrior,
    LaplacePrior,
    NormalPrior,
    Prior,
    ScaleMixturePrior,
    get_prior,
    register_prior,
)
from bnn.models.scale_mixture import ScaleMixtureNormal
from bnn.models.sites import WeightSite

from bnn.registry import Registry

__all__ = [
    "ACTIVATIONS", "LIKELIHOODS", "PRIORS", "DATA_PLATE", "OBSERVED_SITE",
    "BayesianMLP", "BernoulliLikelihood", "CategoricalLikelihood", "GaussianLikelihood",
    "GaussianPrior", "LaplacePrior", "Likelihood", "MultiHeadMLP", "NormalPrior",
    "PosteriorPrior", "Prior", "Registry", "ScaleMixtureNormal",
    "ScaleMixturePrior", "WeightSite", "get_likelihood", "get_prior", "prior_function_draws", "register_prior",
]
