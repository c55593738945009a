"""Variational posteriors (guides) for the collection's models, by name."""

from guides.autonormal import autonormal
from guides.registry import GUIDES, GuideFactory, build_guide, register_guide

__all__ = ["GUIDES", "GuideFactory", "autonormal", "build_guide", "register_guide"]
