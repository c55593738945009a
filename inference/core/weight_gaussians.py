r"""Each weight's Gaussian :math:`\mathcal{N}(m_k, s_k^2)` read off a fitted posterior: the prior of the next task.

Three sources, in this order:

* a mean-field Gaussian guide (``meanfield``, ``empirical-bayes``, ``autonormal``): its own :math:`m_k` and
  :math:`s_k`, exactly (variational continual learning, Nguyen et al. 2018);
* a Laplace posterior :math:`\mathcal{N}(\theta_{MAP}, \Lambda^{-1})`: :math:`m = \theta_{MAP}` and the diagonal of
  the precision, :math:`s_k = \Lambda_{kk}^{-1/2}` (online Laplace, Ritter et al. 2018; EWC's quadratic penalty is
  this prior's log-density). With ``structure="diag"`` that is the whole posterior; with ``"full"``,
  :math:`\Lambda = (SS^\top)^{-1}` from the covariance factor :math:`S`, so
  :math:`\Lambda_{kk} = \sum_j (S^{-1})_{jk}^2`; with ``"kron"``, from the factors' eigendecompositions
  (:meth:`~bnn.guides.kron_covariance.KronCovariance.precision_diagonal`). It is also the mean-field Gaussian closest
  to the Laplace posterior in :math:`\mathrm{KL}(q \,\|\, p)`;
* any draws, by moment matching when asked: :math:`m_k` the mean and :math:`s_k` the standard deviation of the
  draws of weight :math:`k` (the Gaussian closest in :math:`\mathrm{KL}(p \,\|\, q)`; an approximation for a
  posterior that is not Gaussian, recorded as the source ``moment-matching``). The only source for a variational
  posterior of a network with hierarchical priors, whose guide is over the scales and the standardised weights
  :math:`\theta = \tau z`, not over :math:`\theta`.

Only the weight sites become the prior; likelihood latents such as a learned noise keep the likelihood's own prior.
"""

from __future__ import annotations

import pyro
import torch
from bnn.guides.flat_normal import FlatNormalGuide
from bnn.guides.flat_weights import split_flat
from bnn.guides.laplace import LaplaceGuide
from bnn.inference.core.hierarchical_refusal import hierarchical_priors_named
from bnn.models.posterior_prior import PosteriorPrior
from pyro.infer.autoguide import AutoNormal


def _laplace_gaussians(guide: LaplaceGuide) -> tuple[dict, dict]:
    if guide.covered_from > 0 or guide.indices is not None:
        structure = "last-layer" if guide.indices is None else "subnetwork"
        raise ValueError(f"a Laplace posterior with structure={structure!r} holds the other weights at their MAP with no "
                         "spread, so it is no Gaussian prior for them: fit with structure='diag' (online Laplace) or 'full'")
    if guide.is_kron:
        std = guide.scale.precision_diagonal().rsqrt()
    elif guide.scale.dim() == 1:
        std = guide.scale
    else:
        inverse_factor = torch.linalg.solve_triangular(guide.scale, torch.eye(guide.scale.shape[0], dtype=guide.scale.dtype),
                                                       upper=False)
        std = inverse_factor.pow(2).sum(0).rsqrt()
    return split_flat(guide.sites, guide.mean), split_flat(guide.sites, std)


def weight_gaussians(posterior, *, moment_matching: bool = False) -> PosteriorPrior:
    """The :class:`~bnn.models.posterior_prior.PosteriorPrior` of ``posterior``'s weight sites (see the module notes).

    Raises
    ------
    ValueError
        For a posterior without a Gaussian guide (loaded from disk, or a sampler or ensemble), or a variational
        posterior of a network with hierarchical priors (its guide is over the scales and standardised weights),
        unless ``moment_matching`` is set; for a last-layer or subnetwork Laplace posterior; for draws with no spread.
    """
    if not isinstance(moment_matching, bool):
        raise ValueError(f"moment_matching must be True or False, got {moment_matching!r}")
    sites = [site.name for site in posterior.model.sites]
    guide = posterior.extras.get("guide")
    guide = getattr(guide, "guide", guide)  # SVI hands out its guide bound to its parameters (svi.fitted_guide)
    mean_field, hierarchical = isinstance(guide, (FlatNormalGuide, AutoNormal)), bool(posterior.model.hierarchical_sites)
    if mean_field and hierarchical and not moment_matching:
        raise ValueError(
            f"the weights under the hierarchical prior(s) {hierarchical_priors_named(posterior.model)} are a latent "
            "scale times a standardised weight, so this guide holds no Gaussian over them: pass moment_matching=True "
            "to give each weight the mean and standard deviation of its draws"
        )
    if mean_field and not hierarchical:
        with torch.no_grad(), pyro.get_param_store().scope(posterior.extras.get("param_state")):
            if isinstance(guide, FlatNormalGuide):
                pairs = guide.site_loc_scale()
            else:
                pairs = {name: guide._get_loc_and_scale(name) for name in sites}
        loc = {name: pairs[name][0].detach() for name in sites}
        scale = {name: pairs[name][1].detach() for name in sites}
        return PosteriorPrior(loc, scale, source=str(posterior.record.guide))
    if isinstance(guide, LaplaceGuide):
        loc, scale = _laplace_gaussians(guide)
        return PosteriorPrior(loc, scale, source="laplace")
    if not moment_matching:
        raise ValueError(
            f"this {posterior.method!r} posterior carries no Gaussian guide (a sampler, an ensemble, MC dropout, or a "
            "posterior loaded from disk), so its draws are not known to be Gaussian: pass moment_matching=True to "
            "give each weight the mean and standard deviation of its draws"
        )
    draws = posterior.draws()
    if next(iter(draws.values())).shape[0] < 2:
        raise ValueError("moment matching needs at least 2 draws; refit with more draws (num_samples)")
    scale = {name: draws[name].std(0) for name in sites}
    flat = [name for name, value in scale.items() if not bool((value > 0).all())]
    if flat:
        raise ValueError(f"the draws of sites {flat} do not vary (a point estimate), so they give no Gaussian prior")
    return PosteriorPrior({name: draws[name].mean(0) for name in sites}, scale, source="moment-matching")
