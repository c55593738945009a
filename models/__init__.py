"""Bayesian neural networks as Pyro programs: the model interface (:class:`BayesianNetwork`), the networks that
implement it, priors on weights, likelihoods."""

from bnn.models.activations import ACTIVATIONS
from bnn.models.cnn import BayesianCNN
from bnn.models.dropout import DroppedInputs
from bnn.models.hierarchical_priors import ARDPrior, HierarchicalPrior, HorseshoePrior, LayerScalePrior
from bnn.models.likelihoods import (
    LIKELIHOODS,
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    Likelihood,
    get_likelihood,
)
from bnn.models.mlp import BayesianMLP
from bnn.models.multihead import MultiHeadMLP
from bnn.models.network import (
    ARCHITECTURES,
    DATA_PLATE,
    OBSERVED_SITE,
    BayesianNetwork,
    DenseLayers,
    check_network,
    network_from_config,
)
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
from bnn.models.torch_module import TorchModuleNetwork, from_module

from bnn.registry import Registry

__all__ = [
    "ACTIVATIONS", "ARCHITECTURES", "LIKELIHOODS", "PRIORS", "DATA_PLATE", "OBSERVED_SITE",
    "ARDPrior", "BayesianCNN", "BayesianMLP", "BayesianNetwork", "BernoulliLikelihood", "CategoricalLikelihood",
    "DenseLayers", "DroppedInputs", "GaussianLikelihood", "GaussianPrior", "HierarchicalPrior", "HorseshoePrior", "LaplacePrior",
    "LayerScalePrior", "Likelihood", "MultiHeadMLP", "NormalPrior", "PosteriorPrior", "Prior", "Registry",
    "ScaleMixtureNormal", "ScaleMixturePrior", "TorchModuleNetwork", "WeightSite", "check_network", "from_module",
    "get_likelihood", "get_prior", "network_from_config",
    "prior_function_draws", "register_prior",
]
