r"""The variational empirical-Bayes guide: a mean-field Gaussian whose prior variances are learned.

Per weight, :math:`q(w_k) = \mathcal{N}(\mu_k, \sigma_k^2)` and a zero-mean Gaussian prior of
precision :math:`\lambda_k = 1/s_k^2`. The Gaussian KL and its derivative in the precision,

.. math::

    \mathrm{KL}_k(\lambda_k) = \tfrac12\big[\lambda_k(\mu_k^2 + \sigma_k^2) - \ln\lambda_k
    - 1 - \ln\sigma_k^2\big], \qquad
    \frac{\partial\,\mathrm{KL}_k}{\partial\lambda_k} = \tfrac12\big[\mu_k^2 + \sigma_k^2 - 1/\lambda_k\big],

vanish at the optimal prior variance :math:`s_k^2 = \mu_k^2 + \sigma_k^2`, where

.. math::

    \mathrm{KL}_k = \tfrac12 \ln\Big(1 + \frac{\mu_k^2}{\sigma_k^2}\Big)
    = \tfrac12 \ln(1 + \gamma_k^2), \qquad \mu_k = \gamma_k \sigma_k,\quad
    \sigma_k = \operatorname{softplus}(\rho_k),

so the guide learns :math:`(\gamma, \rho)` (no 0/0 at :math:`\mu = \sigma = 0`),
initialised by default with :math:`\mu` at a draw of the prior and :math:`\rho = -3` (a constant
:math:`\gamma = 0`, every mean at 0, is a stationary point: the class notes), and its objective per example is
:math:`\text{NLL} + \mathrm{KL}/L` with :math:`\mathrm{KL} = \tfrac12 \sum_k \nu_k`,
:math:`\nu_k = \ln(1 + \gamma_k^2)`, :math:`L` the number of training examples. Pyro's SVI
loss is :math:`L` times that objective (the same optimum).

The source material's final line writes the KL as :math:`\langle\nu, \nu\rangle / 2`,
which contradicts its own derivation (above, :math:`\tfrac12\sum_k \nu_k`); this guide
implements the derivation.

Empirical Bayes here learns the variance of a zero-mean Gaussian prior per weight, so it
is defined for Gaussian priors only: the guide refuses a model whose weight sites have
another prior (a Laplace or scale-mixture prior has no single variance to learn, and a
run labelled with it would silently fit a Gaussian one). The Gaussian prior's scale plays
no part: the guide's log-density of each weight site is :math:`\log p(w) + \mathrm{KL}`
(see :mod:`bnn.guides.flat_normal`), so the model's :math:`\log p(w)` cancels draw by draw and
the empirical-Bayes KL, at the learned variance, replaces the prior's KL term. A
likelihood latent (a learned noise ``sigma``) keeps the model's prior and a Monte Carlo
KL, with :math:`q` Gaussian in its unconstrained space, mean :math:`\gamma\sigma` as well.
The learned prior variances :math:`s_k^2` are :meth:`EmpiricalBayesGuide.prior_variances`,
stored by SVI in the posterior's ArviZ ``constant_data`` as ``prior_variance.<site>``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from bnn.guides.flat_normal import FlatNormalGuide, check_finite
from bnn.guides.registry import register_guide
from bnn.models.priors import PRIORS, GaussianPrior
from pyro.nn import PyroParam, pyro_method

PRIOR_VARIANCE = "prior_variance"


def empirical_bayes_kl(gamma: torch.Tensor) -> torch.Tensor:
    r"""Elementwise Gaussian KL at the optimal prior variance, as a function of :math:`\gamma = \mu/\sigma`.

    With :math:`q = \mathcal{N}(\mu, \sigma^2)` and the prior variance at its optimum
    :math:`s^2 = \mu^2 + \sigma^2`,

    .. math::

        \mathrm{KL}\big(q \,\|\, \mathcal{N}(0, \mu^2 + \sigma^2)\big)
        = \tfrac12\ln\Big(1 + \frac{\mu^2}{\sigma^2}\Big) = \tfrac12\ln(1 + \gamma^2),

    finite at :math:`\mu = \sigma = 0` in this parametrisation (see the module docstring).

    Parameters
    ----------
    gamma : torch.Tensor
        :math:`\gamma`, any shape.

    Returns
    -------
    torch.Tensor
        The KL of each entry, in nats, shaped like ``gamma``.
    """
    return 0.5 * torch.log1p(gamma**2)


@register_guide("empirical-bayes", description="mean-field Gaussian with per-weight prior variances set to their optimum")
class EmpiricalBayesGuide(FlatNormalGuide):
    r"""The empirical-Bayes guide of ``model``, whose weight priors must be Gaussian (their variances are learned).

    Parameters
    ----------
    model : BayesianNetwork
        The model, with a :class:`~bnn.models.priors.GaussianPrior` on every weight site (its
        scale plays no part).
    init_rho : float
        Initial :math:`\rho` of every latent (-3 gives :math:`\sigma \approx 0.049`).
    init_gamma : float or "prior"
        Initial :math:`\gamma = \mu / \sigma` of every latent, or ``"prior"``: :math:`\mu` at a draw of the
        prior (a likelihood latent at its prior's median), :math:`\gamma = \mu / \operatorname{softplus}(\rho)`.
        A constant :math:`\gamma = 0` starts every hidden unit at the same function, where the KL term
        :math:`\tfrac12\ln(1 + \gamma^2)` is at its minimum and the likelihood's expected gradient of each mean
        vanishes by symmetry: a stationary point SVI does not leave (the network stays constant); a draw breaks
        the symmetry.

    Raises
    ------
    ValueError
        For a weight site whose prior is not Gaussian (naming the sites and priors), or a
        non-finite ``init_rho`` or ``init_gamma``, or an ``init_gamma`` string other than ``"prior"``.
    """

    def __init__(self, model, *, init_rho: float = -3.0, init_gamma: float | str = "prior") -> None:
        others = {name: PRIORS.name_of(type(prior)) or type(prior).__name__
                  for name, prior in model.prior.items() if not isinstance(prior, GaussianPrior)}
        if others:
            raise ValueError(
                f"the empirical-Bayes guide learns the variance of a zero-mean Gaussian prior per weight, so it needs "
                f"a Gaussian prior; sites {others} have other priors: use prior 'gaussian' (--prior gaussian; its "
                "scale plays no part because the variance is learned), or another guide for these priors"
            )
        if isinstance(init_gamma, str) and init_gamma != "prior":
            raise ValueError(f"init_gamma must be a finite number or 'prior', got {init_gamma!r}")
        init_rho = check_finite("init_rho", init_rho)
        super().__init__(model)
        self.analytic_sites = tuple(self.weight_sites)
        rho = torch.full((self.num_latents,), init_rho)
        if init_gamma == "prior":
            gamma = self.flatten(self.prior_start()) / F.softplus(rho)
        else:
            gamma = torch.full((self.num_latents,), check_finite("init_gamma", init_gamma))
        # one parameter tensor, rows (gamma, rho): one Adam update per step instead of two
        self.gamma_rho = PyroParam(torch.stack([gamma, rho]))

    def flat_parameters(self) -> dict[str, torch.Tensor]:
        r"""The flat guide parameters from the rows :math:`(\gamma, \rho)` of ``gamma_rho``.

        .. math::

            \sigma = \operatorname{softplus}(\rho) = \ln(1 + e^{\rho}), \qquad \mu = \gamma\,\sigma .

        Returns
        -------
        dict of str to torch.Tensor
            ``"loc"`` (:math:`\mu`), ``"scale"`` (:math:`\sigma`) and ``"gamma"`` (:math:`\gamma`), each of
            shape ``(D,)``: the weights first, then the likelihood's latents (unconstrained space).
        """
        gamma, rho = self.gamma_rho
        scale = F.softplus(rho)
        return {"loc": gamma * scale, "scale": scale, "gamma": gamma}

    def weight_log_density(self, z, params):
        r""":math:`\tfrac12\sum_k \ln(1 + \gamma_k^2)` over the weights."""
        return empirical_bayes_kl(params["gamma"][: self.num_weights]).sum()

    @pyro_method
    def prior_variances(self) -> dict[str, torch.Tensor]:
        r"""The learned prior variance :math:`s_k^2 = \mu_k^2 + \sigma_k^2 = \sigma_k^2 (1 + \gamma_k^2)` of every weight."""
        params = self.flat_parameters()
        variance = (params["scale"] ** 2 * (1 + params["gamma"] ** 2)).detach()
        return {name: self.blocks[name].take(variance) for name in self.weight_sites}

    def fitted_constants(self) -> dict[str, torch.Tensor]:
        """Per-site arrays for the posterior's ``constant_data``: ``prior_variance.<site>``."""
        return {f"{PRIOR_VARIANCE}.{name}": value for name, value in self.prior_variances().items()}
