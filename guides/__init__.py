"""Variational posteriors (guides) for the collection's models, by name."""

from bnn.guides.autonormal import autonormal
from bnn.guides.correlated import flow, full, lowrank
from bnn.guides.empirical_bayes import EmpiricalBayesGuide
from bnn.guides.kl import KLEstimator
from bnn.guides.laplace import LaplaceGuide
from bnn.guides.meanfield import MeanFieldGuide
from bnn.guides.registry import GUIDES, GuideFactory, build_guide, register_guide

__all__ = [
    "GUIDES", "EmpiricalBayesGuide", "GuideFactory", "KLEstimator", "LaplaceGuide", "MeanFieldGuide", "autonormal", "build_guide",
    "flow", "full", "lowrank", "register_guide",
]
