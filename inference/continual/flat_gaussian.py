r"""The mean-field Gaussian :math:`q(W) = \prod_k \mathcal{N}(w_k;\, \mu_k, \sigma_k^2)` that UCL and BGD carry from
task to task, over the flat weight vector of the benchmark's network (:mod:`bnn.guides.flat_weights`).

It is carried as a :class:`~bnn.models.posterior_prior.PosteriorPrior` config (``carry["posterior"]``), the form
VCL and online Laplace carry their posteriors in, so ``get_prior(carry["posterior"])`` reads any of them. The first
task starts at means drawn from :math:`\mathcal{N}(0, 0.1^2)` (the mean-field guide's ``"small"`` start, under the
task's seed) and a scale the method chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.guides.meanfield import SMALL_INIT_SD
from bnn.inference.continual.setup import ContinualSetup
from bnn.models import PosteriorPrior, get_prior
from bnn.models.network import BayesianNetwork


@dataclass(frozen=True)
class FlatGaussian:
    r"""Means :math:`\mu` and scales :math:`\sigma > 0`, each of shape ``(D,)`` in the order of ``model.sites``."""

    mean: torch.Tensor
    std: torch.Tensor

    @classmethod
    def start(cls, model: BayesianNetwork, carried: Mapping[str, Any] | None, first_std: float,
              generator: torch.Generator) -> FlatGaussian:
        """The carried Gaussian (a ``PosteriorPrior`` config), or for the first task means drawn from
        :math:`\\mathcal{N}(0, 0.1^2)` with ``generator`` and every scale ``first_std``."""
        if carried is not None:
            prior = get_prior(carried)
            return cls(join_sites(model.sites, prior.loc), join_sites(model.sites, prior.scale))
        size = sum(site.numel for site in model.sites)
        mean = SMALL_INIT_SD * torch.randn(size, generator=generator, dtype=torch.get_default_dtype())
        return cls(mean, torch.full((size,), float(first_std)))

    def draws(self, num: int, generator: torch.Generator) -> torch.Tensor:
        r""":math:`\theta_s = \mu + \sigma \odot \epsilon_s`, :math:`\epsilon_s \sim \mathcal{N}(0, I)`, shape ``(num, D)``."""
        noise = torch.randn(num, self.mean.shape[0], generator=generator, dtype=self.mean.dtype)
        return self.mean + self.std * noise

    def config(self, model: BayesianNetwork, source: str) -> dict[str, Any]:
        """The Gaussian as a :class:`~bnn.models.posterior_prior.PosteriorPrior` config, JSON-able."""
        return PosteriorPrior(split_flat(model.sites, self.mean), split_flat(model.sites, self.std), source).config()

    def predictor(self, setup: ContinualSetup, model: BayesianNetwork,
                  seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """``x ->`` the mean class probabilities ``(n, K)``, or the predictive mean ``(n,)``, over
        ``setup.options.num_samples`` draws made once with ``seed``."""
        weights = split_flat(model.sites, self.draws(setup.options.num_samples, torch.Generator().manual_seed(seed)))

        def predict(x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                f = model.forward(x, weights)
            return f.softmax(-1).mean(0) if setup.benchmark.is_classification else f[..., 0].mean(0)

        return predict


def unlearnt_heads(setup: ContinualSetup, model: BayesianNetwork, task: int) -> torch.Tensor:
    """``(D,)`` booleans: the weights of the output heads of tasks ``task`` and later (multi-head), which no data
    reached before task ``task``."""
    unseen = [setup.benchmark.multi_head and site.name.startswith("heads.")
              and int(site.name.split(".")[1]) >= task for site in model.sites]
    return torch.cat([torch.full((site.numel,), flag) for site, flag in zip(model.sites, unseen)])
