"""Bayesian neural networks as Pyro programs: networks, priors on weights, likelihoods."""

from models.activations import ACTIVATIONS
from models.likelihoods import (
    LIKELIHOODS,
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    Likelihood,
    get_likelihood,
)
from models.mlp import DATA_PLATE, OBSERVED_SITE, BayesianMLP
from models.priors import PRIORS, GaussianPrior, LaplacePrior, Prior, ScaleMixturePrior, get_prior, register_prior
from models.registry import Registry
from models.scale_mixture import ScaleMixtureNormal
from models.sites import WeightSite

__all__ = [
    "ACTIVATIONS", "LIKELIHOODS", "PRIORS", "DATA_PLATE", "OBSERVED_SITE",
    "BayesianMLP", "BernoulliLikelihood", "CategoricalLikelihood", "GaussianLikelihood",
    "GaussianPrior", "LaplacePrior", "Likelihood", "Prior", "Registry", "ScaleMixtureNormal",
    "ScaleMixturePrior", "WeightSite", "get_likelihood", "get_prior", "register_prior",
]
