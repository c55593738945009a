r"""The posterior precision of a Laplace approximation at any weights, to look at before factorising it.

.. math::

    \Lambda(\theta) = \nabla^2_\theta\big[-\log p(y \mid x, \theta)\big] + P(\theta)

with the likelihood curvature of :mod:`~bnn.inference.laplace.curvature` (the exact Hessian or the GGN) and the
prior's :math:`P(\theta) = -\nabla^2_\theta \log p(\theta)` (diagonal). The fit needs :math:`\Lambda(\theta_{MAP})`
positive definite; its eigenvalues show whether it is: the GGN's always are (the prior adds a positive diagonal to a
positive semi-definite matrix), the exact Hessian's of a network with hidden layers often are not, even at a
converged MAP.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from bnn.guides.flat_weights import join_sites
from bnn.inference.laplace.curvature import HessianType, Structure, covered_from, likelihood_curvature
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_search.map_estimate import WORKING_DTYPE, working_data

from bnn.options import parse_option


def posterior_precision(model, x: torch.Tensor, y: torch.Tensor, values: Mapping[str, torch.Tensor], *,
                        hessian: HessianType | str = HessianType.GGN,
                        structure: Structure | str = Structure.FULL) -> torch.Tensor:
    r""":math:`\Lambda(\theta)` over the weights ``structure`` covers, in float64.

    Parameters
    ----------
    model : BayesianNetwork
        The model.
    x, y : torch.Tensor
        The training data.
    values : mapping of str to torch.Tensor
        A value of every weight site, shaped like the site (one draw of a posterior, such as the MAP of
        ``fit(model, data, "map")``: ``{name: value[0, 0]}``), and of the likelihood's latent sites (``sigma``).
    hessian, structure : str
        As the Laplace fit's options, but for ``structure="subnetwork"``, refused.

    Returns
    -------
    torch.Tensor
        ``(D_c, D_c)`` for ``full`` and ``last-layer``, the diagonal ``(D_c,)`` for ``diag``.

    Raises
    ------
    ValueError
        For ``structure="subnetwork"``: its precision is the block of the ``full`` one over the subnetwork's weights.
    """
    hessian, structure = parse_option(HessianType, hessian, "hessian"), parse_option(Structure, structure, "structure")
    if structure is Structure.SUBNETWORK:
        raise ValueError("posterior_precision does not choose a subnetwork (the fit does, by the diagonal Laplace "
                         "approximation's variances): take structure='full' and its block over the fit's "
                         "record.subnetwork_indices, which is the subnetwork's precision")
    theta = join_sites(model.sites, values).to(WORKING_DTYPE)
    latents = {name: torch.as_tensor(values[name], dtype=WORKING_DTYPE) for name in model.likelihood.latent_priors()}
    x_work, y_work = working_data(x, y)
    precision = likelihood_curvature(model, x_work, y_work, theta, latents, hessian_type=hessian,
                                     structure=structure)
    prior = prior_curvature(model, theta, covered_from(model, structure))
    return precision + (prior if precision.dim() == 1 else torch.diag(prior))
