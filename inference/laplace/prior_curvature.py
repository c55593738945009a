r"""The prior's precision for the Laplace approximation: its own curvature at :math:`\theta_{MAP}`.

The priors factorise over weights, so the Hessian of :math:`-\log p(\theta)` is diagonal with

.. math::

    P_k = -\frac{\partial^2}{\partial \theta_k^2} \log p_k(\theta_k) \Big|_{\theta_{MAP}},

computed by automatic differentiation of the prior's ``log_prob``. For a Gaussian prior
:math:`\mathcal{N}(0, s^2)` it is exactly :math:`1/s^2` everywhere. A scale mixture has
positive curvature near zero and in the tails and negative curvature in between. A
Laplace prior has zero curvature wherever it is differentiable, so it gives no precision
and is refused. A precision that is not positive on every covered weight is refused with
a message saying which prior/structure pairs work.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.curvature.gauss_newton import elementwise_curvature
from bnn.models.sites import WeightSite


def covered_sites(model, start: int) -> Iterator[WeightSite]:
    """The weight sites whose entries lie at or after index ``start`` of the flat vector."""
    offset = 0
    for site in model.sites:
        if offset >= start:
            yield site
        offset += site.numel


def _refusal(model, problems: list[str], where: str) -> ValueError:
    last = model.output_sites()[-1].group
    return ValueError(
        f"the Laplace approximation needs a positive prior curvature -d^2/dw^2 log p(w) on every weight it covers, "
        f"but {where} it is zero, negative or undefined for: {'; '.join(problems)}. What works: Gaussian priors "
        f"with every structure (full, diag, last-layer); other priors only where their curvature is positive at "
        f"W_MAP (a scale mixture may be, a Laplace prior never is: its curvature is 0 almost everywhere); with "
        f"structure='last-layer' only the prior of {last!r} counts, so prior={{'*': <any prior>, {last!r}: "
        f"'gaussian'}} works with it"
    )


def check_prior_curvature_possible(model, start: int) -> None:
    """Before any fitting: refuse a covered prior whose curvature is positive nowhere on a draw from it.

    Uses the global random state (call it under :func:`bnn.runtime.seeding.seeded`).
    """
    problems = []
    for site in covered_sites(model, start):
        prior = model.prior[site.name]
        if site.name in model.hierarchical_sites:
            continue  # Gaussian given its scales, which the fit sets (bnn.inference.laplace.type2_scales)
        distribution = prior.distribution(site)
        curvature = elementwise_curvature(distribution, distribution.sample())
        if not (torch.isfinite(curvature) & (curvature > 0)).any():
            problems.append(f"{type(prior).__name__} on {site.name!r}")
    if problems:
        raise _refusal(model, problems, "on draws from the prior")


def prior_curvature(model, theta: torch.Tensor, start: int) -> torch.Tensor:
    r"""The diagonal prior precision :math:`P_k` at ``theta`` for the entries from ``start`` on, shape ``(D - start,)``.

    Raises
    ------
    ValueError
        When :math:`P_k` is not positive and finite for some covered weight.
    """
    values = split_flat(model.sites, theta)
    pieces, problems = [], []
    for site in covered_sites(model, start):
        prior = model.prior[site.name]
        curvature = elementwise_curvature(prior.distribution(site), values[site.name]).reshape(-1)
        bad = int((~(torch.isfinite(curvature) & (curvature > 0))).sum())
        if bad:
            problems.append(f"{type(prior).__name__} on {site.name!r} ({bad} of {site.numel} weights)")
        pieces.append(curvature)
    if problems:
        raise _refusal(model, problems, "at W_MAP")
    return torch.cat(pieces)
