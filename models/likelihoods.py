r"""Observation models :math:`p(y \mid f)` for the network output :math:`f = f(x; W)`.

``gaussian``
    Regression, :math:`y \sim \mathcal{N}(f, \sigma^2)`. The noise :math:`\sigma` is either
    fixed (``scale=0.1``) or a latent site ``sigma`` with a half-normal prior
    (``scale=None``), learned with the weights.
``bernoulli``
    Binary classification, :math:`y \sim \text{Bernoulli}(\text{sigmoid}(f))`, labels in {0, 1}.
``categorical``
    Multiclass, :math:`y \sim \text{Categorical}(\text{softmax}(f))`, labels in {0, ..., K-1}.

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

from bnn.registry import Registry, build_from, config_of

LIKELIHOODS: Registry[type[Likelihood]] = Registry("likelihood")


class Likelihood(abc.ABC):
    """Base class of observation models."""

    task: ClassVar[str]  # "regression", "binary" or "multiclass"

    def latent_priors(self) -> dict[str, dist.Distribution]:
        """Priors of the likelihood's own latent sites (none unless overridden)."""
        return {}

    @abc.abstractmethod
    def distribution(self, f: torch.Tensor, latents: dict[str, torch.Tensor]) -> dist.Distribution:
        """The distribution of ``y`` given the network output ``f`` and the latent values."""

    @abc.abstractmethod
    def check_targets(self, y: torch.Tensor, out_features: int) -> torch.Tensor:
        """Return ``y`` in the dtype the likelihood needs, or raise ``ValueError``."""

    def check_out_features(self, out_features: int) -> None:
        """Raise ``ValueError`` when the network's output size does not suit the likelihood."""

    def config(self) -> dict[str, Any]:
        """A JSON-able description that :func:`get_likelihood` rebuilds."""
        return config_of(self, LIKELIHOODS)


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
        expected = (y.shape[0],) if out_features == 1 else (y.shape[0], out_features)
        if tuple(y.shape) != expected:
            raise ValueError(
                f"regression targets for {out_features} output(s) must have shape {expected}, "
                f"got {tuple(y.shape)}"
            )
        return y.to(torch.get_default_dtype())


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


def get_likelihood(spec: Likelihood | str | dict[str, Any]) -> Likelihood:
    """Build a likelihood from an instance, a registered name, or ``{"name": ..., **options}``."""
    return build_from(spec, LIKELIHOODS, Likelihood)
