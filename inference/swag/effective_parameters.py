r"""SWAG's own check of its Gaussian: the effective number of parameters (Spiegelhalter et al. 2002, DIC's
:math:`p_D`) of each member's Gaussian on the training rows, against the most a posterior Gaussian of the model has.

For a member's Gaussian :math:`q = \mathcal{N}(\bar\theta, \Sigma)` and the training log-likelihood
:math:`L(\theta) = \sum_{i=1}^N \log p(y_i \mid x_i, \theta)`,

.. math::

    p_D = 2\,\big(L(\bar\theta) - \mathbb{E}_q[L(\theta)]\big), \qquad
    \hat p_D = 2\,\Big(L(\bar\theta) - \frac1S\sum_{s=1}^S L(\theta_s)\Big), \qquad
    \mathrm{SE}(\hat p_D) = 2\,\mathrm{sd}_s\big(L(\theta_s)\big) / \sqrt{S},

from :math:`S` of the member's draws (:data:`CHECK_DRAWS` at most). Where :math:`L` is near quadratic over
:math:`q`, :math:`p_D = \operatorname{tr}(J\Sigma)` with :math:`J` the Gauss-Newton matrix of :math:`-L` at
:math:`\bar\theta`. A Gaussian posterior of the model, the Laplace approximation :math:`\Sigma = (J + P)^{-1}` with the
prior's precision :math:`P \succeq 0`, has

.. math::

    \operatorname{tr}\big(J (J + P)^{-1}\big) \le \operatorname{rank} J \le D,

:math:`D` the model's latent values (its weights and a learned noise): each direction the data determine costs at most
half a nat of training log-likelihood, in expectation over the posterior. A Gaussian whose :math:`p_D` exceeds
:math:`D` by more than :data:`EXCESS_Z` standard errors is wider than any posterior Gaussian of these weights: SGD's
iterates spread further than the posterior (along the stiffest direction, at step share :math:`s` and :math:`N/B`
batches an epoch, :math:`s/(2 - s) \cdot N/B` times the posterior's variance: :mod:`bnn.inference.swag.options`), and
its draws predict worse than its mean. The check fails then, naming the members and the option to lower.
"""

from __future__ import annotations

import math

import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.record import FitRecord

CHECK_DRAWS = 20
"""The most draws of each member the check evaluates on the training rows (a fifth of SWAG's default draws: the check
costs 20 forward passes over the data, against SWAG's 100 epochs of SGD)."""
EXCESS_Z = 3.0
r"""How many standard errors :math:`\hat p_D` must exceed :math:`D` by for the check to fail."""


def effective_parameters(model, x: torch.Tensor, y: torch.Tensor, samples: dict[str, torch.Tensor],
                         means: dict[str, torch.Tensor], draws: int = CHECK_DRAWS) -> tuple[list[float], list[float]]:
    r""":math:`\hat p_D` of each member and its standard error (module notes), from the first ``draws`` of each
    member's ``samples`` ``(C, S, ...)`` and the members' Gaussian means ``means`` ``(C, 1, ...)``, on the training
    rows ``(x, y)``."""
    kept = {name: value[:, :draws] for name, value in samples.items()}
    record = FitRecord(seed=0, train_seconds=0.0)
    at_draws = Posterior(model, kept, x, y, record).pointwise_log_likelihood(x, y).sum(-1).double()  # (C, S)
    at_means = Posterior(model, means, x, y, record).pointwise_log_likelihood(x, y).sum(-1).double()[:, 0]  # (C,)
    kept_draws = at_draws.shape[1]
    spread = at_draws.std(dim=1) if kept_draws > 1 else torch.full_like(at_means, math.inf)
    return (2 * (at_means - at_draws.mean(dim=1))).tolist(), (2 * spread / math.sqrt(kept_draws)).tolist()


def too_wide(p_d: list[float], standard_errors: list[float], latent_values: int) -> list[int]:
    r"""The members whose :math:`\hat p_D` exceeds ``latent_values`` (:math:`D`) by more than :data:`EXCESS_Z`
    standard errors."""
    return [member for member, (value, error) in enumerate(zip(p_d, standard_errors))
            if value - EXCESS_Z * error > latent_values]
