r"""Priors on the weights of a Bayesian network.

A prior is a small object with one method, :meth:`Prior.distribution`, that returns
the (elementwise independent) distribution of one weight site. The model asks its
prior for every site, so swapping a prior swaps nothing else:

>>> model.prior = "laplace"                                  # doctest: +SKIP
>>> model.prior = {"*": GaussianPrior(1.0), "layers.1": LaplacePrior(0.1)}  # doctest: +SKIP

Writing a new prior takes a few lines of user code::

    @register_prior("student-t")
    @dataclass(frozen=True)
    class StudentTPrior(Prior):
        df: float = 3.0
        def distribution(self, site):
            return dist.StudentT(self.df, 0.0, 1.0).expand(site.shape)

The built-in priors:

``gaussian``
    :math:`w \sim \mathcal{N}(0, s^2)`, with :math:`s = \text{scale}/\sqrt{\text{fan\_in}}`
    when ``fan_in_scaling`` is set (the variance-preserving choice for deep nets). The
    MAP estimate under it is L2-regularised maximum likelihood with weight decay
    :math:`1/(2s^2)`.
``scale-mixture``
    Blundell et al.'s :math:`\pi\mathcal{N}(0,\sigma_1^2) + (1-\pi)\mathcal{N}(0,\sigma_2^2)`.
``laplace``
    :math:`w \sim \text{Laplace}(0, b)`, density :math:`\frac{1}{2b}e^{-|w|/b}`; the MAP
    view is L1 regularisation with strength :math:`1/b`.
``posterior``
    :math:`w_k \sim \mathcal{N}(m_k, s_k^2)`, each weight with its own mean and scale: a fitted
    posterior made into the prior of the next task (:mod:`bnn.models.posterior_prior`).

The Gaussian ones are :class:`NormalPrior` subclasses: a mean-field guide's KL to them has a closed form.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyro.distributions as dist
import torch
from bnn.models.fast_forms import LaplaceForm, NormalForm, PriorForm, ScaleMixtureForm
from bnn.models.scale_mixture import ScaleMixtureNormal
from bnn.models.sites import WeightSite

from bnn.registry import Registry, build_from, config_of

PRIORS: Registry[type[Prior]] = Registry("prior")


def register_prior(name: str, prior_class: type[Prior] | None = None):
    """Add a :class:`Prior` subclass to the registry under ``name`` (a class decorator without ``prior_class``)."""
    return PRIORS.register(name, prior_class)


def _check_positive(owner: object, **values: float) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(
                f"{type(owner).__name__}: {key} must be a positive finite number, got {value!r}"
            )


class Prior(abc.ABC):
    """Base class: the prior distribution of each weight site of a network."""

    @abc.abstractmethod
    def distribution(self, site: WeightSite) -> dist.Distribution:
        """Distribution of ``site`` with ``batch_shape == site.shape`` and no event dims."""

    def config(self) -> dict[str, Any]:
        """A JSON-able description ``{"name": ..., **options}`` that :func:`get_prior` rebuilds."""
        return config_of(self, PRIORS)

    def fast_form(self, site: WeightSite) -> PriorForm | None:
        """The density of ``site`` as a family the compiled NUTS potentials evaluate (:mod:`bnn.models.fast_forms`);
        ``None`` (the default): NUTS runs on the torch potential. A subclass that changes :meth:`distribution` without
        stating its own form gets ``None``."""
        return None


def _density_unchanged(prior: Prior, owner: type) -> bool:
    """Whether ``prior``'s class keeps ``owner``'s density (a subclass that overrides ``distribution`` or
    ``site_loc_scale`` may not match ``owner``'s fast form)."""
    kind = type(prior)
    return all(getattr(kind, name, None) is getattr(owner, name, None) for name in ("distribution", "site_loc_scale"))


class NormalPrior(Prior):
    r"""Base class of the Gaussian priors :math:`w_k \sim \mathcal{N}(m_k, s_k^2)`, independent over weights."""

    @abc.abstractmethod
    def site_loc_scale(self, site: WeightSite) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean :math:`m` and standard deviation :math:`s` of every entry of ``site``, each shaped like the site."""

    def distribution(self, site: WeightSite) -> dist.Distribution:
        loc, scale = self.site_loc_scale(site)
        return dist.Normal(loc, scale)

    def fast_form(self, site: WeightSite) -> NormalForm | None:
        return NormalForm(*self.site_loc_scale(site)) if type(self).distribution is NormalPrior.distribution else None


@register_prior("gaussian")
@dataclass(frozen=True)
class GaussianPrior(NormalPrior):
    r""":math:`\mathcal{N}(0, s^2)` with :math:`s` = ``scale`` (divided by
    :math:`\sqrt{\text{fan\_in}}` when ``fan_in_scaling``)."""

    scale: float = 1.0
    fan_in_scaling: bool = False

    def __post_init__(self) -> None:
        _check_positive(self, scale=self.scale)
        if not isinstance(self.fan_in_scaling, bool):
            raise ValueError(f"GaussianPrior: fan_in_scaling must be True or False (true/false on the command line), "
                             f"got {self.fan_in_scaling!r}")

    def site_scale(self, site: WeightSite) -> float:
        """The standard deviation used for ``site``."""
        return self.scale / math.sqrt(site.fan_in) if self.fan_in_scaling else self.scale

    def site_loc_scale(self, site: WeightSite) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(site.shape), torch.full(site.shape, self.site_scale(site))

    def distribution(self, site: WeightSite) -> dist.Distribution:
        return dist.Normal(0.0, self.site_scale(site)).expand(site.shape)

    def fast_form(self, site: WeightSite) -> NormalForm | None:
        return NormalForm(*self.site_loc_scale(site)) if _density_unchanged(self, GaussianPrior) else None


@register_prior("scale-mixture")
@dataclass(frozen=True)
class ScaleMixturePrior(Prior):
    r"""Blundell et al.'s :math:`\pi\mathcal{N}(0,\sigma_1^2) + (1-\pi)\mathcal{N}(0,\sigma_2^2)`.

    Defaults are the paper's best MNIST setting, :math:`\pi = 1/2`,
    :math:`\sigma_1 = e^{0}`, :math:`\sigma_2 = e^{-6}`.
    """

    pi: float = 0.5
    sigma1: float = 1.0
    sigma2: float = math.exp(-6.0)

    def __post_init__(self) -> None:
        _check_positive(self, sigma1=self.sigma1, sigma2=self.sigma2)
        if not (isinstance(self.pi, (int, float)) and 0.0 < self.pi < 1.0):
            raise ValueError(f"ScaleMixturePrior: pi must lie strictly between 0 and 1, got {self.pi!r}")

    def distribution(self, site: WeightSite) -> dist.Distribution:
        return ScaleMixtureNormal(self.pi, self.sigma1, self.sigma2, site.shape)

    def fast_form(self, site: WeightSite) -> ScaleMixtureForm | None:
        return ScaleMixtureForm(self.pi, self.sigma1, self.sigma2) if _density_unchanged(self, ScaleMixturePrior) else None


@register_prior("laplace")
@dataclass(frozen=True)
class LaplacePrior(Prior):
    r""":math:`\text{Laplace}(0, b)` with :math:`b` = ``scale``: the L1 analogue of the Gaussian."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self, scale=self.scale)

    def distribution(self, site: WeightSite) -> dist.Distribution:
        return dist.Laplace(0.0, self.scale).expand(site.shape)

    def fast_form(self, site: WeightSite) -> LaplaceForm | None:
        return LaplaceForm(self.scale) if _density_unchanged(self, LaplacePrior) else None


def get_prior(spec: Prior | str | Mapping[str, Any]) -> Prior:
    """Build a prior from an instance, a registered name, or a config ``{"name": ..., **options}``.

    Raises
    ------
    ValueError
        For an unknown name or invalid options, naming the problem.
    """
    return build_from(spec, PRIORS, Prior)
