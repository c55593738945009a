"""Variational posteriors (guides) for the collection's models, by name."""

from guides.autonormal import autonormal
from guides.empirical_bayes import EmpiricalBayesGuide
from guides.kl import KLEstimator
from guides.laplace import LaplaceGuide
from guides.meanfield import MeanFieldGuide
from guides.registry import GUIDES, GuideFactory, build_guide, register_guide

__all__ = [
    "GUIDES", "EmpiricalBayesGuide", "GuideFactory", "KLEstimator", "LaplaceGuide", "MeanFieldGuide", "autonormal", "build_guide",
    "register_guide",
]
