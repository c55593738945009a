r"""Subnetwork Laplace (Daxberger et al. 2021, "Bayesian deep learning via subnetwork inference"): a full covariance
over the few weights whose marginal variance is largest, every other weight held at the MAP.

With the diagonal Laplace precision at :math:`\theta_{MAP}`, :math:`\lambda_k = G_{kk} + \alpha P_k` (the GGN's
diagonal, :mod:`bnn.inference.curvature.output_curvature`, plus the prior's precision), the subnetwork :math:`S` is
the :math:`D_S` weights (``subnetwork_size``) of largest marginal variance :math:`1/\lambda_k`, ties going to the lower
index. The posterior is

.. math::

    q(\theta) :\ \theta_S \sim \mathcal{N}\big(\theta_{MAP,S},\ \Sigma_S\big),\qquad
    \Sigma_S = \big(G_{SS} + \alpha P_S\big)^{-1},\qquad \theta_{\bar S} = \theta_{MAP,\bar S},

with :math:`G_{SS} = \sum_i J_{i,S}^\top H_i J_{i,S}` the GGN's block over :math:`S`: the Laplace approximation of
the posterior of :math:`\theta_S` given the other weights at their MAP, so :math:`\Sigma_S` is the inverse of the
precision's :math:`S` block (a conditional), not the :math:`S` block of its inverse (a marginal). laplace-torch's
``SubnetLaplace`` with its ``LargestVarianceDiagLaplaceSubnetMask`` computes the same. The Laplace evidence is that of
:math:`\theta_S` alone, with :math:`D_S` in place of :math:`D`.
"""

from __future__ import annotations

import torch
from bnn.inference.curvature.output_curvature import gauss_newton_matrix
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_search.map_estimate import MapEstimate

DEFAULT_SUBNETWORK_SIZE = 1000
"""Weights in the subnetwork when ``subnetwork_size`` is left out (all of them in a smaller network): a dense
precision of 1000^2 float64 entries, 8 MB."""


def largest_variance_indices(diagonal_precision: torch.Tensor, size: int) -> torch.Tensor:
    r"""The positions of the ``size`` largest marginal variances :math:`1/\lambda_k` of a diagonal precision
    :math:`\lambda` ``(D,)``, increasing; among equal variances the lower positions come first."""
    return torch.argsort(diagonal_precision, stable=True)[:size].sort().values


def subnetwork_curvature(model, x: torch.Tensor, estimate: MapEstimate, size: int, *,
                         diagonal: torch.Tensor | None = None, progress: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The subnetwork :math:`S` of the module notes at ``estimate`` (its :math:`\theta_{MAP}`, latents and multiplier
    :math:`\alpha`) and the likelihood's GGN block :math:`G_{SS}` over it.

    Parameters
    ----------
    size : int
        :math:`D_S`, at most the number of weights.
    diagonal : torch.Tensor, optional
        The GGN's diagonal :math:`G_{kk}` ``(D,)``, where the fit has formed it already (to tune :math:`\alpha`).

    Returns
    -------
    tuple of torch.Tensor
        The positions of :math:`S` in :math:`\theta`, increasing, ``(D_S,)``, and :math:`G_{SS}` ``(D_S, D_S)``.
    """
    theta, latents = estimate.theta, estimate.latents
    if diagonal is None:
        diagonal = gauss_newton_matrix(model, x, theta, latents, diagonal=True, progress=progress)
    precision = diagonal + estimate.multiplier * prior_curvature(model, theta, 0)
    indices = largest_variance_indices(precision, size)
    return indices, gauss_newton_matrix(model, x, theta, latents, subset=indices, progress=progress)
