r"""The log joint over the flat weights :math:`\theta` (:mod:`bnn.guides.flat_weights`) of a model: its
log-likelihood :math:`\log p(y \mid x, \theta)`, its log prior :math:`\log p(\theta)` and the prior scaled by
:math:`\alpha`, what the MAP search and its polish maximise."""

from __future__ import annotations

from collections.abc import Callable

import pyro
import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference.curvature.gauss_newton import elementwise_curvature
from bnn.models.flat_gaussian_prior import FlatGaussianPrior
from bnn.models.priors import GaussianPrior

from bnn.runtime.seeding import seeded
from bnn.runtime.timing import median_seconds


def log_prior(model, theta: torch.Tensor, distributions: dict | None = None) -> torch.Tensor:
    r""":math:`\log p(\theta)` under the model's priors (``distributions`` caches :func:`prior_distributions`)."""
    distributions = distributions or prior_distributions(model)
    values = split_flat(model.sites, theta)
    return sum(distributions[site.name].log_prob(values[site.name]).sum() for site in model.sites)


def prior_distributions(model) -> dict:
    """The prior distribution of every weight site, by site name."""
    return {site.name: model.prior[site.name].distribution(site) for site in model.sites}


def log_likelihood(model, x, y, theta: torch.Tensor, latents: dict[str, torch.Tensor]) -> torch.Tensor:
    r""":math:`\log p(y \mid x, \theta)` with the likelihood's latents at ``latents``."""
    return model.observation_distribution(x, {**split_flat(model.sites, theta), **latents}).log_prob(y).sum()


def squared_error(model, x, y, theta: torch.Tensor) -> torch.Tensor:
    r""":math:`S(\theta) = \sum_{i,k} (y_{ik} - f_{ik})^2`."""
    with torch.no_grad():
        f = model.forward(x, split_flat(model.sites, theta))
        return (f - y.reshape(f.shape)).pow(2).sum()


def most_likely_noise(model, x, y, theta: torch.Tensor) -> dict[str, torch.Tensor]:
    """The likelihood's latents at their maximum-likelihood values given the weights ``theta``
    (:meth:`~bnn.models.likelihoods.Likelihood.most_likely_latents`: a learned Gaussian noise's RMS residual)."""
    if not model.likelihood.latent_priors():
        return {}
    with torch.no_grad():
        return model.likelihood.most_likely_latents(model.forward(x, split_flat(model.sites, theta)), y)


def evidence_possible(model, start: int) -> bool:
    """Whether the evidence of :mod:`bnn.inference.curvature.evidence` applies: a Gaussian prior on every entry
    from ``start``."""
    offset = 0
    for site in model.sites:
        if offset >= start and not isinstance(model.prior[site.name], GaussianPrior):
            return False
        offset += site.numel
    return True


class ScaledPrior:
    r""":math:`\alpha \log p(\theta)`, its curvature, and the Gaussian base precision :math:`P` of the evidence.

    The log density is the closed form of :class:`~bnn.models.flat_gaussian_prior.FlatGaussianPrior` where the prior
    is Gaussian (the same value at a fraction of the cost), else the sites' torch distributions."""

    def __init__(self, model, weight: float, distributions: dict | None = None,
                 gaussian: FlatGaussianPrior | None = None) -> None:
        self.model, self.weight = model, weight
        self.distributions = distributions or prior_distributions(model)
        self.gaussian = gaussian or FlatGaussianPrior.of(model)

    def reweighted(self, weight: float) -> ScaledPrior:
        """The same prior with :math:`\alpha` = ``weight``."""
        return ScaledPrior(self.model, weight, self.distributions, self.gaussian)

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        if self.gaussian is not None:
            return self.weight * self.gaussian.log_prob(theta)
        return self.weight * log_prior(self.model, theta, self.distributions)

    def curvature(self, theta: torch.Tensor, start: int) -> torch.Tensor:
        r""":math:`-\alpha\,\partial^2 \log p(\theta_k) / \partial\theta_k^2` for the entries from ``start`` on."""
        values = split_flat(self.model.sites, theta)
        pieces = [elementwise_curvature(self.distributions[s.name], values[s.name]).reshape(-1) for s in self.model.sites]
        return self.weight * torch.cat(pieces)[start:]


def log_joint_gradient(model, x: torch.Tensor, y: torch.Tensor) -> Callable[[], object]:
    r"""One value-and-gradient of :math:`\log p(y \mid x, \theta) + \log p(\theta)` by autograd at a prior draw of
    the flat weights, as the MAP, Laplace and the stochastic-gradient methods take them."""
    with seeded(0):
        prior = ScaledPrior(model, 1.0)
        theta = join_sites(model.sites, {name: d.sample() for name, d in prior.distributions.items()}).to(x.dtype)
    latents = {name: torch.ones(()) for name in model.likelihood.latent_priors()}

    def call() -> None:
        point = theta.clone().requires_grad_(True)
        with pyro.validation_enabled(False), torch.enable_grad():
            total = log_likelihood(model, x, y, point, latents) + prior.log_prob(point)
            torch.autograd.grad(total, point)

    return call


def log_joint_gradient_seconds(model, x: torch.Tensor, y: torch.Tensor, options=None) -> float:
    """The median wall time of :func:`log_joint_gradient` on ``(x, y)``: the cost unit of the methods that step on
    the log joint (``options`` is not read)."""
    return median_seconds(log_joint_gradient(model, x, y))
