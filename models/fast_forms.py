r"""The closed forms a prior or a likelihood declares for the compiled NUTS potentials, next to its torch form.

A prior's :meth:`~bnn.models.priors.Prior.fast_form` and a likelihood's
:meth:`~bnn.models.likelihoods.Likelihood.fast_form` name their density as one of the families below, with its
parameters; the compiled kernels of :mod:`bnn.inference.nuts` (the numba kernel and the hand-derived NumPy gradient)
evaluate those families and nothing else. A prior or likelihood that declares none (``None``, the default of the base
classes) runs on the torch potential, and NUTS says so with its cost (:func:`bnn.inference.nuts.potential.why_torch`).
The kernels' value and gradient are checked against the torch form at a probe point before sampling, so a form that
does not match its torch density is caught and the torch potential used.

Prior families (per weight :math:`w_k` of a site):

- :class:`NormalForm`: :math:`\mathcal{N}(m_k, s_k^2)`;
- :class:`LaplaceForm`: :math:`\text{Laplace}(0, b)`;
- :class:`ScaleMixtureForm`: :math:`\pi\mathcal{N}(0, \sigma_1^2) + (1 - \pi)\mathcal{N}(0, \sigma_2^2)`.

Likelihood families (network output :math:`f`): :class:`GaussianForm` (fixed :math:`\sigma`, or learned with a
:math:`\text{HalfNormal}(c)` prior), :class:`BernoulliForm` (logit :math:`f`), :class:`CategoricalForm` (logits
:math:`f`), :class:`HeteroscedasticGaussianForm` (means and softplus scales).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class NormalForm:
    """:math:`\\mathcal{N}(m_k, s_k^2)` per weight: ``loc`` and ``scale`` shaped like the site."""

    loc: torch.Tensor
    scale: torch.Tensor


@dataclass(frozen=True)
class LaplaceForm:
    """:math:`\\text{Laplace}(0, b)` per weight, ``scale`` = :math:`b`."""

    scale: float


@dataclass(frozen=True)
class ScaleMixtureForm:
    """:math:`\\pi\\mathcal{N}(0, \\sigma_1^2) + (1 - \\pi)\\mathcal{N}(0, \\sigma_2^2)` per weight."""

    pi: float
    sigma1: float
    sigma2: float


PriorForm = NormalForm | LaplaceForm | ScaleMixtureForm


@dataclass(frozen=True)
class GaussianForm:
    """:math:`y \\sim \\mathcal{N}(f, \\sigma^2)`; ``scale`` ``None``: :math:`\\sigma` is the latent ``sigma`` with prior
    :math:`\\text{HalfNormal}(\\text{noise\\_prior\\_scale})`."""

    scale: float | None
    noise_prior_scale: float


@dataclass(frozen=True)
class BernoulliForm:
    """:math:`y \\sim \\text{Bernoulli}(\\text{sigmoid}(f))`."""


@dataclass(frozen=True)
class CategoricalForm:
    """:math:`y \\sim \\text{Categorical}(\\text{softmax}(f))`."""


@dataclass(frozen=True)
class HeteroscedasticGaussianForm:
    """:math:`y_k \\sim \\mathcal{N}(f_k, s_k^2)`, :math:`s_k = \\text{softplus}(f_{K+k}) + s_{min}`."""

    min_scale: float


LikelihoodForm = GaussianForm | BernoulliForm | CategoricalForm | HeteroscedasticGaussianForm
