r"""Observation models :math:`p(y \mid f)` for the network output :math:`f = f(x; W)`.

``gaussian``
    Regression, :math:`y \sim \mathcal{N}(f, \sigma^2)`. The noise :math:`\sigma` is either
    fixed (``scale=0.1``) or a latent site ``sigma`` with a half-normal prior
    (``scale=None``), learned with the weights.
``bernoulli``
    Binary classification, :math:`y \sim \text{Bernoulli}(\text{sigmoid}(f))`, labels in {0, 1}.
``categorical``
    Multiclass, :math:`y \sim \text{Categorical}(\text{softmax}(f))`, labels in {0, ..., K-1}.
``heteroscedastic-gaussian``
    Regression with input-dependent noise (Nix & Weigend 1994; Lakshminarayanan et al. 2017):
    the network outputs a mean and a raw scale per target, :math:`y \sim \mathcal{N}(f_\mu, s^2)` with
    :math:`s = \operatorname{softplus}(f_s) + s_{min}`, so the network has ``out_features = 2 x targets``.

:meth:`Likelihood.distribution` takes ``f`` of shape ``(*sample, n, out_features)`` and
returns a distribution whose batch shape is ``(*sample, n)``: one factor per data point,
which the model puts under its ``data`` plate.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import pyro.distributions as dist
import torch
from bnn.models.fast_forms import (
    BernoulliForm,
    CategoricalForm,
    GaussianForm,
    HeteroscedasticGaussianForm,
    LikelihoodForm,
)

from bnn.registry import Registry, build_from, config_of

LIKELIHOODS: Registry[type[Likelihood]] = Registry("likelihood")


class Likelihood(abc.ABC):
    """Base class of observation models."""

    task: ClassVar[str]  # "regression", "binary" or "multiclass"

    def latent_priors(self) -> dict[str, dist.Distribution]:
        """Priors of the likelihood's own latent sites (none unless overridden)."""
        return {}

    def most_likely_latents(self, f: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        """The latent values that maximise the likelihood of ``y`` given outputs ``f`` ``(*sample, n, out_features)``,
        shaped ``(*sample, *site_shape)``: none unless overridden (a subclass without a closed form keeps its prior)."""
        return {}

    @abc.abstractmethod
    def distribution(self, f: torch.Tensor, latents: dict[str, torch.Tensor]) -> dist.Distribution:
        """The distribution of ``y`` given the network output ``f`` and the latent values."""

    @abc.abstractmethod
    def check_targets(self, y: torch.Tensor, out_features: int) -> torch.Tensor:
        """Return ``y`` in the dtype the likelihood needs, or raise ``ValueError``."""

    def check_out_features(self, out_features: int) -> None:
        """Raise ``ValueError`` when the network's output size does not suit the likelihood."""

    def network_outputs(self, targets: int) -> int:
        """The network outputs (``out_features``) this likelihood reads for ``targets`` target columns (or classes)."""
        return targets

    def config(self) -> dict[str, Any]:
        """A JSON-able description that :func:`get_likelihood` rebuilds."""
        return config_of(self, LIKELIHOODS)

    def fast_form(self) -> LikelihoodForm | None:
        """The density as a family the compiled NUTS potentials evaluate (:mod:`bnn.models.fast_forms`); ``None``
        (the default, and for a subclass that changes :meth:`distribution` without stating its own): NUTS runs on the
        torch potential."""
        return None

    def _keeps_density_of(self, owner: type) -> bool:
        """Whether this likelihood's class keeps ``owner``'s density (it overrides neither ``distribution`` nor
        ``latent_priors``)."""
        return all(getattr(type(self), name) is getattr(owner, name) for name in ("distribution", "latent_priors"))


def _regression_targets(y: torch.Tensor, targets: int) -> torch.Tensor:
    """``y`` in the default dtype if it has shape ``(n,)`` for one target, ``(n, targets)`` for several."""
    expected = (y.shape[0],) if targets == 1 else (y.shape[0], targets)
    if tuple(y.shape) != expected:
        raise ValueError(f"regression targets for {targets} output(s) must have shape {expected}, got {tuple(y.shape)}")
    return y.to(torch.get_default_dtype())


def _check_one_dimensional(y: torch.Tensor, what: str) -> None:
    if y.dim() != 1:
        raise ValueError(f"{what} targets must be a 1-D tensor of shape (n,), got shape {tuple(y.shape)}")


@LIKELIHOODS.register("gaussian")
@dataclass(frozen=True)
class GaussianLikelihood(Likelihood):
    r""":math:`y \sim \mathcal{N}(f, \sigma^2)`.

    Parameters
    ----------
    scale : float or None
        The fixed noise standard deviation; ``None`` makes :math:`\sigma` a latent site
        ``sigma`` with prior :math:`\text{HalfNormal}(\text{noise\_prior\_scale})`.
    noise_prior_scale : float
        Scale of the half-normal prior of a learned noise.
    """

    task: ClassVar[str] = "regression"
    scale: float | None = 0.1
    noise_prior_scale: float = 1.0

    def __post_init__(self) -> None:
        for key in ("scale", "noise_prior_scale"):
            value = getattr(self, key)
            if value is None and key == "scale":
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"GaussianLikelihood: {key} must be a positive finite number, got {value!r}")

    def latent_priors(self) -> dict[str, dist.Distribution]:
        if self.scale is not None:
            return {}
        return {"sigma": dist.HalfNormal(torch.tensor(float(self.noise_prior_scale)))}

    def most_likely_latents(self, f: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        r"""A learned noise at its maximum-likelihood value given ``f``, the root mean square residual
        :math:`\hat\sigma = \big(\tfrac{1}{nK}\sum_{i,k} (y_{ik} - f_{ik})^2\big)^{1/2}`, one per sample."""
        if self.scale is not None:
            return {}
        squared = (f - y.reshape(y.shape[0], -1)).pow(2)
        return {"sigma": (squared.sum(dim=(-2, -1)) / squared.shape[-2:].numel()).sqrt()}

    def noise_scale(self, latents: dict[str, torch.Tensor]) -> torch.Tensor | float:
        """:math:`\\sigma` with sample dims ``(*sample, 1)`` ready to broadcast over data points."""
        if self.scale is not None:
            return self.scale
        return latents["sigma"].unsqueeze(-1)

    def distribution(self, f, latents):
        sigma = self.noise_scale(latents)
        if f.shape[-1] == 1:
            return dist.Normal(f[..., 0], sigma)
        if not isinstance(sigma, float):
            sigma = sigma.unsqueeze(-1)
        return dist.Normal(f, sigma).to_event(1)

    def check_targets(self, y, out_features):
        return _regression_targets(y, out_features)

    def fast_form(self) -> GaussianForm | None:
        keeps = self._keeps_density_of(GaussianLikelihood)
        return GaussianForm(self.scale, self.noise_prior_scale) if keeps else None


@LIKELIHOODS.register("heteroscedastic-gaussian")
@dataclass(frozen=True)
class HeteroscedasticGaussianLikelihood(Likelihood):
    r""":math:`y_k \sim \mathcal{N}(f_k, s_k^2)` with :math:`s_k = \operatorname{softplus}(f_{K+k}) + s_{min}`.

    The network's ``2K`` outputs are the ``K`` means, then the ``K`` raw scales (``out_features = 2K``; size a
    model with :meth:`network_outputs`). The noise is a function of the input, not a latent site, so every method
    fits it with the weights; ``min_scale`` keeps the density bounded where a scale would collapse on a point.

    Parameters
    ----------
    min_scale : float
        :math:`s_{min} > 0`, in the units of the (standardised) targets.
    """

    task: ClassVar[str] = "regression"
    min_scale: float = 1e-3

    def __post_init__(self) -> None:
        value = self.min_scale
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"HeteroscedasticGaussianLikelihood: min_scale must be a positive finite number, got {value!r}")

    def network_outputs(self, targets: int) -> int:
        return 2 * targets

    def check_out_features(self, out_features):
        if out_features % 2:
            raise ValueError(f"a heteroscedastic Gaussian likelihood needs out_features = 2 x targets (a mean and a raw "
                             f"scale per target), got {out_features}; size the model with network_outputs(targets)")

    def mean_and_scale(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The means and scales, each ``(*sample, n, K)``, from the outputs ``f`` of shape ``(*sample, n, 2K)``."""
        mean, raw = f.chunk(2, dim=-1)
        return mean, torch.nn.functional.softplus(raw) + self.min_scale

    def distribution(self, f, latents):
        mean, scale = self.mean_and_scale(f)
        if mean.shape[-1] == 1:
            return dist.Normal(mean[..., 0], scale[..., 0])
        return dist.Normal(mean, scale).to_event(1)

    def check_targets(self, y, out_features):
        return _regression_targets(y, out_features // 2)

    def fast_form(self) -> HeteroscedasticGaussianForm | None:
        keeps = self._keeps_density_of(HeteroscedasticGaussianLikelihood)
        return HeteroscedasticGaussianForm(self.min_scale) if keeps else None


@LIKELIHOODS.register("bernoulli")
@dataclass(frozen=True)
class BernoulliLikelihood(Likelihood):
    r""":math:`y \sim \text{Bernoulli}(\text{sigmoid}(f))` for labels in {0, 1}."""

    task: ClassVar[str] = "binary"

    def check_out_features(self, out_features):
        if out_features != 1:
            raise ValueError(f"a Bernoulli likelihood needs out_features=1 (one logit), got {out_features}")

    def distribution(self, f, latents):
        return dist.Bernoulli(logits=f[..., 0])

    def check_targets(self, y, out_features):
        _check_one_dimensional(y, "binary")
        if not torch.all((y == 0) | (y == 1)):
            bad = torch.unique(y[(y != 0) & (y != 1)])[:5].tolist()
            raise ValueError(f"binary labels must be 0 or 1; found {bad}: map your classes to {{0, 1}}")
        return y.to(torch.get_default_dtype())

    def fast_form(self) -> BernoulliForm | None:
        return BernoulliForm() if self._keeps_density_of(BernoulliLikelihood) else None


@LIKELIHOODS.register("categorical")
@dataclass(frozen=True)
class CategoricalLikelihood(Likelihood):
    r""":math:`y \sim \text{Categorical}(\text{softmax}(f))` for labels in {0, ..., K-1}, K = out_features."""

    task: ClassVar[str] = "multiclass"

    def check_out_features(self, out_features):
        if out_features < 2:
            raise ValueError(f"a categorical likelihood needs out_features >= 2 classes, got {out_features}")

    def distribution(self, f, latents):
        return dist.Categorical(logits=f)

    def check_targets(self, y, out_features):
        _check_one_dimensional(y, "class")
        if y.is_floating_point() and not torch.all(y == torch.round(y)):
            raise ValueError("class labels must be whole numbers 0..K-1, found fractional values")
        if torch.any((y < 0) | (y >= out_features)):
            raise ValueError(
                f"class labels must lie in 0..{out_features - 1} for {out_features} classes; "
                f"found min {y.min().item()}, max {y.max().item()}"
            )
        return y.long()

    def fast_form(self) -> CategoricalForm | None:
        return CategoricalForm() if self._keeps_density_of(CategoricalLikelihood) else None


def get_likelihood(spec: Likelihood | str | dict[str, Any]) -> Likelihood:
    """Build a likelihood from an instance, a registered name, or ``{"name": ..., **options}``."""
    return build_from(spec, LIKELIHOODS, Likelihood)
