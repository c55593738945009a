r"""The KL term of a mean-field Gaussian guide, :math:`\mathrm{KL}(q \,\|\, p)`, closed form or Monte Carlo.

For one weight with :math:`q(w) = \mathcal{N}(\mu, \sigma^2)` and a Gaussian prior
:math:`p(w) = \mathcal{N}(m, s^2)` (:math:`m = 0` for the ``gaussian`` prior; a weight's own mean for a
posterior made into a prior, :class:`~bnn.models.posterior_prior.PosteriorPrior`),

.. math::

    \mathrm{KL}(q \,\|\, p) = \ln\frac{s}{\sigma} + \frac{\sigma^2 + (\mu - m)^2}{2 s^2} - \frac{1}{2}.

For any other prior (scale mixture, Laplace) there is no closed form, and Blundell et
al.'s estimator is used: :math:`\log q(w) - \log p(w)` at the reparameterised draw
:math:`w = \mu + \sigma\varepsilon` of the same ELBO particle, unbiased for the KL.
The closed form removes the KL's Monte Carlo noise from the gradient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

import torch
from bnn.models.priors import NormalPrior, Prior
from bnn.models.sites import WeightSite

from bnn.options import parse_option


class KLEstimator(str, Enum):
    """How a mean-field guide estimates the KL of each weight site to its prior."""

    CLOSED_FORM = "closed-form"
    """The analytic Gaussian KL; every weight site needs a Gaussian prior (:class:`~bnn.models.priors.NormalPrior`)."""
    MONTE_CARLO = "monte-carlo"
    """:math:`\\log q(w) - \\log p(w)` at the sampled weights (Blundell et al.), for any prior."""
    AUTO = "auto"
    """Per site: closed form where the site's prior is Gaussian, Monte Carlo elsewhere."""


def get_kl_estimator(value: KLEstimator | str) -> KLEstimator:
    """Accept the enum or its string; raise ``ValueError`` naming the choices."""
    return parse_option(KLEstimator, value, "kl estimator")


def site_estimators(
    estimator: KLEstimator | str, sites: Sequence[WeightSite], priors: Mapping[str, Prior]
) -> dict[str, KLEstimator]:
    """The estimator of each weight site: ``AUTO`` resolved, ``CLOSED_FORM`` checked against the priors.

    Raises
    ------
    ValueError
        When ``closed-form`` is asked for a site whose prior is not Gaussian.
    """
    estimator = get_kl_estimator(estimator)
    if estimator is KLEstimator.MONTE_CARLO:
        return {site.name: estimator for site in sites}
    gaussian = {site.name: isinstance(priors[site.name], NormalPrior) for site in sites}
    if estimator is KLEstimator.CLOSED_FORM:
        others = {name: type(priors[name]).__name__ for name, ok in gaussian.items() if not ok}
        if others:
            raise ValueError(
                f"the closed-form KL needs a Gaussian prior, but sites {others} have other priors; "
                "use kl='monte-carlo' or kl='auto' (Monte Carlo where the prior is not Gaussian)"
            )
    return {name: KLEstimator.CLOSED_FORM if ok else KLEstimator.MONTE_CARLO for name, ok in gaussian.items()}


def gaussian_kl(loc: torch.Tensor, scale: torch.Tensor, prior_scale: torch.Tensor | float,
                prior_loc: torch.Tensor | float = 0.0) -> torch.Tensor:
    r"""Elementwise KL divergence of :math:`q = \mathcal{N}(\mu, \sigma^2)` from the prior :math:`p = \mathcal{N}(m, s^2)`.

    .. math::

        \mathrm{KL}(q \,\|\, p) = \ln\frac{s}{\sigma} + \frac{\sigma^2 + (\mu - m)^2}{2 s^2} - \frac12 \;\ge 0,

    zero exactly when :math:`\mu = m` and :math:`\sigma = s`.

    Parameters
    ----------
    loc : torch.Tensor
        :math:`\mu`, any shape.
    scale : torch.Tensor
        :math:`\sigma > 0`, broadcastable with ``loc``.
    prior_scale : torch.Tensor or float
        :math:`s > 0`, broadcastable with ``loc``.
    prior_loc : torch.Tensor or float
        :math:`m`, broadcastable with ``loc`` (0 by default).

    Returns
    -------
    torch.Tensor
        The KL of each entry, in nats, shaped like the broadcast of the inputs.
    """
    prior_scale = torch.as_tensor(prior_scale, dtype=scale.dtype)
    return torch.log(prior_scale) - torch.log(scale) + (scale**2 + (loc - prior_loc) ** 2) / (2 * prior_scale**2) - 0.5
