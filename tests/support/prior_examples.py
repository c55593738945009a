"""Every registered prior for a test: by name, or with values where the prior needs them (``posterior``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from bnn.models import PRIORS, HierarchicalPrior, PosteriorPrior, Prior, WeightSite, get_prior

NEEDS_VALUES = ("posterior",)
"""Registered priors that hold per-weight values, so they cannot be built from their name alone."""
BY_NAME = [name for name in PRIORS.names() if name not in NEEDS_VALUES]
"""The registered priors a name builds (``--prior NAME``)."""
HIERARCHICAL = [name for name in PRIORS.names() if issubclass(PRIORS.get(name), HierarchicalPrior)]
"""The registered priors whose scales are latent: their weights have a conditional prior, not a fixed distribution."""
FIXED = [name for name in PRIORS.names() if name not in HIERARCHICAL]
"""The registered priors with a fixed distribution per site."""


def example_prior(name: str, sites: Sequence[WeightSite], seed: int = 0) -> Prior:
    """The prior ``name`` for ``sites``: a posterior prior gets means N(0, 1) and scales in [0.5, 1.5)."""
    if name not in NEEDS_VALUES:
        return get_prior(name)
    generator = torch.Generator().manual_seed(seed)
    loc = {site.name: torch.randn(site.shape, generator=generator) for site in sites}
    scale = {site.name: 0.5 + torch.rand(site.shape, generator=generator) for site in sites}
    return PosteriorPrior(loc, scale, source="test")
