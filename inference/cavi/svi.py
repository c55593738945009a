r"""Stochastic variational inference in the CAVI family, for comparison: the same :math:`q(w)\,q(\tau)`, fitted by Adam.

The guide is :math:`q(w) = \mathcal{N}(\mu, LL^\top)` (:math:`L` lower triangular with a positive diagonal) times
:math:`q(\tau) = \mathrm{Gamma}(a, b)`, the family whose ELBO maximum CAVI reaches in closed form
(:mod:`bnn.inference.cavi.fit`). Each Adam step follows a one-draw reparameterised gradient of the ELBO (the Gamma
draw by implicit reparameterisation), with the rate decaying geometrically from ``lr`` to ``lr * final_lr_ratio``.
Since the family and the objective are CAVI's, the ELBO of the fitted factors (in closed form,
:func:`~bnn.inference.cavi.elbo.meanfield_elbo`) is at most CAVI's, and equal to it at SVI's optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch
from bnn.inference.cavi.data import check_regression_data
from bnn.inference.cavi.elbo import meanfield_elbo
from bnn.inference.cavi.model import normal_gamma_regression
from bnn.inference.cavi.moments import WeightsAndPrecision
from bnn.inference.cavi.prior import NormalGammaPrior
from pyro.infer import SVI, Trace_ELBO
from pyro.optim import ClippedAdam
from torch.distributions import constraints

from bnn import options
from bnn.runtime.seeding import seeded
from bnn.runtime.workers import one_torch_thread


@dataclass(frozen=True)
class SVIResult(WeightsAndPrecision):
    r"""The factors :math:`q(w) = \mathcal{N}(\mu, \Sigma)`, :math:`q(\tau) = \mathrm{Gamma}(a, b)` after SVI.

    Attributes
    ----------
    weight_mean, weight_covariance : torch.Tensor
        :math:`\mu` ``(d,)`` and :math:`\Sigma = LL^\top` ``(d, d)``.
    tau_shape, tau_rate : float
        :math:`a, b`.
    elbo_estimates : tuple of float
        The one-draw ELBO estimate of each step (noisy).
    elbo : float
        The closed-form ELBO of the final factors.
    """

    weight_mean: torch.Tensor
    weight_covariance: torch.Tensor
    tau_shape: float
    tau_rate: float
    elbo_estimates: tuple[float, ...]
    elbo: float


def meanfield_guide(x: torch.Tensor, y: torch.Tensor | None, prior: NormalGammaPrior) -> None:
    r"""The guide :math:`\mathcal{N}(w; \mu, LL^\top)\,\mathrm{Gamma}(\tau; a, b)`, started at the prior's :math:`a_0, b_0`,
    :math:`\mu = m_0` and :math:`L = 0.1\,I`."""
    loc = pyro.param("w_loc", prior.mean.clone())
    scale_tril = pyro.param("w_scale_tril", 0.1 * torch.eye(prior.num_features, dtype=x.dtype),
                            constraint=constraints.lower_cholesky)
    shape = pyro.param("tau_shape", torch.tensor(prior.shape, dtype=x.dtype), constraint=constraints.positive)
    rate = pyro.param("tau_rate", torch.tensor(prior.rate, dtype=x.dtype), constraint=constraints.positive)
    pyro.sample("tau", dist.Gamma(shape, rate))
    pyro.sample("w", dist.MultivariateNormal(loc, scale_tril=scale_tril))


def fit_svi(
    x, y, prior: NormalGammaPrior, *, steps: int = 2000, lr: float = 0.05, final_lr_ratio: float = 0.02, seed: int = 0,
) -> SVIResult:
    r"""Fit :func:`meanfield_guide` to the Normal-Gamma regression by SVI; see the module docstring.

    Parameters
    ----------
    x, y : array-like
        The design matrix ``(n, d)`` and targets ``(n,)``.
    prior : NormalGammaPrior
        The prior, with ``d`` weights.
    steps : int
        Adam steps.
    lr, final_lr_ratio : float
        Adam's first rate and the ratio of its last to its first (geometric decay in between).
    seed : int
        Seeds the draws; the fit runs in its own parameter store, on one torch thread (the tensors are tiny).

    Raises
    ------
    ValueError
        For bad data, a prior that does not match ``x``, or bad options, before any work starts.
    """
    x, y = check_regression_data(x, y, prior)
    steps = options.positive_int("steps", steps)
    lr = options.positive_number("lr", lr)
    decay = options.fraction("final_lr_ratio", final_lr_ratio) ** (1 / steps)
    with seeded(options.seed("seed", seed)), pyro.get_param_store().scope(), one_torch_thread():
        svi = SVI(normal_gamma_regression, meanfield_guide, ClippedAdam({"lr": lr, "lrd": decay}), Trace_ELBO())
        estimates = tuple(-svi.step(x, y, prior) for _ in range(steps))
        store = pyro.get_param_store()
        with torch.no_grad():
            loc, scale_tril = store["w_loc"].detach(), store["w_scale_tril"].detach()
            shape, rate = store["tau_shape"].item(), store["tau_rate"].item()
    covariance = scale_tril @ scale_tril.T
    return SVIResult(loc, covariance, shape, rate, estimates, meanfield_elbo(x, y, prior, loc, covariance, shape, rate))

