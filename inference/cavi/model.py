r"""The Normal-Gamma regression (:mod:`bnn.inference.cavi.prior`) as a Pyro program, for SVI and Monte Carlo checks.

.. math::

    \tau \sim \mathrm{Gamma}(a_0, b_0),\qquad w \mid \tau \sim \mathcal{N}(m_0, V_0/\tau),\qquad
    y_i \mid w, \tau \sim \mathcal{N}(x_i^\top w, 1/\tau)

with sites ``tau``, ``w`` and ``obs`` (under the plate ``data``). It broadcasts over leading sample
dimensions left of the plate (``vectorize_particles=True``, ``Predictive(parallel=True)``).
"""

from __future__ import annotations

import pyro
import pyro.distributions as dist
import torch
from bnn.inference.cavi.prior import NormalGammaPrior


def normal_gamma_regression(x: torch.Tensor, y: torch.Tensor | None, prior: NormalGammaPrior) -> None:
    """The Pyro model on a float64 design matrix ``x`` ``(n, d)`` and targets ``y`` ``(n,)`` (``None`` to predict)."""
    tau = pyro.sample("tau", dist.Gamma(torch.tensor(prior.shape, dtype=x.dtype), torch.tensor(prior.rate, dtype=x.dtype)))
    scale_tril = torch.linalg.cholesky(prior.covariance) * tau.rsqrt()[..., None, None]
    w = pyro.sample("w", dist.MultivariateNormal(prior.mean, scale_tril=scale_tril))
    with pyro.plate("data", x.shape[0]):
        pyro.sample("obs", dist.Normal((x * w).sum(-1), tau.rsqrt()), obs=y)
