r"""The Laplace approximation: a Gaussian at the MAP weights with the curvature there as precision.

.. math::

    q(\theta) = \mathcal{N}\big(\theta_{MAP}, \Lambda^{-1}\big),\qquad
    \Lambda = H + P,

with :math:`H` the curvature of :math:`-\log p(y \mid x, \theta)` at :math:`\theta_{MAP}`
(GGN or exact Hessian, :mod:`bnn.inference.laplace.curvature`) and :math:`P` the prior's precision
(:mod:`bnn.inference.laplace.prior_curvature`). For a Gaussian likelihood with fixed noise and a
Gaussian prior :math:`\mathcal{N}(0, \sigma_w^2 I)` and the GGN, this is the source
material's :math:`\Lambda = J^\top J / \sigma_y^2 + I / \sigma_w^2`.

Steps: (1) :math:`\theta_{MAP}` by Adam then a Levenberg-Marquardt polish (:mod:`bnn.inference.map_search.map_estimate`); by
default, wherever the covered priors are Gaussian and the curvature is the GGN, the prior precision multiplier
:math:`\alpha` (:math:`P \to \alpha P`) and a learned noise are those maximising the Laplace evidence, the MAP
refitted at each candidate (:mod:`bnn.inference.curvature.evidence`) where its polish is Levenberg-Marquardt, or
elsewhere (an L-BFGS polish, or a MAP fitted on minibatches: each refit would cost a curvature or a training of its
own) the multiplier at the MAP held fixed, from one curvature (:mod:`bnn.inference.laplace.posthoc_precision`);
otherwise :math:`\alpha = 1` and a learned noise is
still chosen by the evidence where the covered priors are Gaussian; a network with ``layer-scale`` or ``ard`` priors
has their scales set to the evidence's type-II maximum instead, a prior precision per group, the MAP refitted at each
round (:mod:`bnn.inference.laplace.type2_scales`); for ``structure="subnetwork"`` the evidence that tunes
:math:`\alpha` is the diagonal Laplace's over every weight, whose diagonal then chooses the subnetwork
(:mod:`bnn.inference.laplace.subnetwork`); (2) :math:`H` and :math:`P` over the structure's weights; (3) the
covariance factor of :math:`\Lambda^{-1}` and the evidence; (4) draws from the :class:`~bnn.guides.laplace.LaplaceGuide`.

At a likelihood temperature :math:`T \ne 1` (:mod:`bnn.inference.core.temperature`) the Gaussian is that of the
tempered log joint, :math:`\tfrac{1}{T}\log p(y \mid x, \theta) + \log p(\theta)`: its mode is the MAP of the
untempered model with the prior weighed by :math:`T`, found as in step (1) with :math:`\alpha = T` held, and its
precision :math:`H/T + P = (H + TP)/T`, the factor of step (3) times :math:`\sqrt{T}`. The prior precision is the
prior's (:math:`\alpha = 1`) and the evidence is not defined (``NaN`` in the record).
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch
from bnn.guides.flat_weights import split_flat
from bnn.guides.laplace import LaplaceGuide
from bnn.inference.core.guide_draws import sample_guide
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.curvature.evidence import gaussian_log_prior, laplace_log_marginal_likelihood
from bnn.inference.curvature.kron_curvature import check_kron_supported, kron_posterior
from bnn.inference.laplace.curvature import (
    HessianType,
    Structure,
    check_ggn_supported,
    check_memory,
    covered_from,
    likelihood_curvature,
)
from bnn.inference.laplace.default_structure import choose_structure
from bnn.inference.laplace.linearized import Linearization, is_linearizable
from bnn.inference.laplace.options import LaplaceOptions, LinkApprox
from bnn.inference.laplace.posthoc_precision import posthoc_multiplier, refits_affordable
from bnn.inference.laplace.prior_curvature import check_prior_curvature_possible, covered_sites, prior_curvature
from bnn.inference.laplace.record import LaplaceRecord
from bnn.inference.laplace.subnetwork import subnetwork_curvature
from bnn.inference.laplace.type2_scales import DESCRIPTION, check_type2_possible, type2_maximum
from bnn.inference.map_search.map_estimate import WORKING_DTYPE, MapEstimate, find_map, working_data
from bnn.models.priors import GaussianPrior

from bnn.runtime.seeding import seeded


def _not_positive_definite(precision: torch.Tensor, hessian_type: HessianType, grad_norm: float) -> ValueError:
    eigenvalues = torch.linalg.eigvalsh(precision)
    bad = int((eigenvalues <= 0).sum())
    found = (
        f"the posterior precision (likelihood curvature + prior precision) at W_MAP is not positive definite: "
        f"{bad} of {eigenvalues.numel()} eigenvalues <= 0, the smallest {eigenvalues.min().item():.3g}"
    )
    if hessian_type is HessianType.EXACT:
        return ValueError(
            f"{found}. With hessian='exact' this means W_MAP is not a strict maximum of the log joint (a saddle "
            f"or a flat direction; the MAP gradient norm was {grad_norm:.3g}); use hessian='ggn', which is "
            "positive semi-definite by construction"
        )
    return ValueError(f"{found}. The GGN is positive semi-definite, so this is round-off in an ill-conditioned "
                      "precision: use structure='diag' or 'last-layer', or a stronger prior")


def covariance_factor(precision: torch.Tensor, hessian_type: HessianType, grad_norm: float):
    r"""The lower-triangular :math:`S` with :math:`SS^\top = \Lambda^{-1}` and :math:`\log\det\Lambda`.

    Factorising the reversed matrix, :math:`J\Lambda J = L L^\top` (:math:`J` the reversal),
    gives :math:`\Lambda = RR^\top` with :math:`R = JLJ` upper triangular, so
    :math:`S = R^{-\top}` is lower triangular. A diagonal ``(D,)`` precision gives
    :math:`S = \Lambda^{-1/2}`.

    Raises
    ------
    ValueError
        When :math:`\Lambda` is not positive definite, saying why and what to use instead.
    """
    if precision.dim() == 1:
        if not bool((precision > 0).all()):
            raise _not_positive_definite(torch.diag(precision), hessian_type, grad_norm)
        return precision.rsqrt(), float(precision.log().sum())
    reversed_precision = precision.flip(0, 1)
    lower, info = torch.linalg.cholesky_ex(reversed_precision)
    if info.item() != 0:
        raise _not_positive_definite(precision, hessian_type, grad_norm)
    del reversed_precision
    logdet = float(2 * lower.diagonal().log().sum())
    upper = lower.flip(0, 1)
    del lower
    identity = torch.eye(upper.shape[0], dtype=upper.dtype)
    return torch.linalg.solve_triangular(upper, identity, upper=True).T, logdet


def _tunable_problem(model, start: int, hessian_type: HessianType) -> str | None:
    """Why the prior precision cannot be tuned by the evidence for this model and curvature, or ``None``."""
    if hessian_type is HessianType.EXACT:
        return "tune_prior_precision needs a positive semi-definite curvature for a unique optimum; use hessian='ggn'"
    priors = [model.prior[site.name] for site in covered_sites(model, start)]
    others = sorted({type(prior).__name__ for prior in priors if not isinstance(prior, GaussianPrior)})
    if others:
        return (f"tune_prior_precision scales a Gaussian prior's precision; the covered weights have {others}: use a "
                "Gaussian prior (or tune_prior_precision=False)")
    return None


def _covered_log_prior(model, theta: torch.Tensor, start: int, indices: torch.Tensor | None) -> float:
    r""":math:`\log p` of the covered weights: those from ``start`` on, or the subnetwork's ``indices`` among them."""
    values = split_flat(model.sites, theta)
    per_weight = torch.cat([model.prior[s.name].distribution(s).log_prob(values[s.name]).reshape(-1)
                            for s in covered_sites(model, start)])
    return float((per_weight if indices is None else per_weight[indices]).sum())


def _gaussian_precisions(model, start: int, multiplier: float) -> dict[str, float] | None:
    """The prior precision per covered site with a Gaussian prior, after the multiplier."""
    precisions = {
        site.name: multiplier / model.prior[site.name].site_scale(site) ** 2
        for site in covered_sites(model, start)
        if isinstance(model.prior[site.name], GaussianPrior)
    }
    return precisions or None


def _check_temperature(model, structure: Structure, temperature: float) -> None:
    """Refuse, before any work, what a tempered Laplace does not do (beside the options' own checks): a hierarchical
    prior (its type-II scales come from the evidence), a learned noise (chosen by the evidence too), a default
    structure that came out as ``kron``."""
    if temperature == UNTEMPERED:
        return
    if model.hierarchical_sites:
        raise ValueError(f"method 'laplace' sets the scales of hierarchical priors by the evidence, which a tempered "
                         f"likelihood does not have: leave temperature={temperature:g} out, or use svi or nuts")
    if model.likelihood.latent_priors():
        raise ValueError(f"method 'laplace' chooses a learned noise by the evidence, which a tempered likelihood does "
                         f"not have: give the likelihood a fixed noise (GaussianLikelihood(scale=...)) or leave "
                         f"temperature={temperature:g} out")
    if structure is Structure.KRON:
        raise ValueError(f"structure 'kron' (the default's choice here: the full curvature exceeds max_memory_gib) is "
                         f"not tempered; with temperature={temperature:g} pass structure='diag' or 'last-layer', or "
                         "raise max_memory_gib")


def _approximate(model, x, y, estimate: MapEstimate, start: int, hessian_type, structure, tune: bool, progress: bool,
                 curvature: torch.Tensor | None = None, indices: torch.Tensor | None = None):
    """Steps (2)-(3) of the module docstring: the covariance factor and the evidence, under the MAP's multiplier;
    ``curvature`` the likelihood's at the MAP where it was formed already (it becomes the precision, in place), over
    the subnetwork ``indices`` for ``structure="subnetwork"``."""
    prior_precision = estimate.multiplier * prior_curvature(model, estimate.theta, start)
    theta = estimate.theta[start:]
    if indices is not None:
        prior_precision, theta = prior_precision[indices], theta[indices]
    log_prior = (gaussian_log_prior(theta, prior_precision) if tune
                 else _covered_log_prior(model, estimate.theta, start, indices))
    if structure is Structure.KRON:
        covariance = kron_posterior(model, x, estimate.theta, estimate.latents, prior_precision)
        logdet = covariance.logdet_precision()
        return covariance, laplace_log_marginal_likelihood(estimate.log_likelihood, log_prior, logdet, theta.numel())
    if curvature is None:
        curvature = likelihood_curvature(model, x, y, estimate.theta, estimate.latents, hessian_type=hessian_type,
                                         structure=structure, progress=progress)
    precision = curvature  # Lambda = H + P, formed in place
    (precision if precision.dim() == 1 else precision.diagonal()).add_(prior_precision)
    del curvature
    scale, logdet = covariance_factor(precision, hessian_type, estimate.grad_norm)
    evidence = laplace_log_marginal_likelihood(estimate.log_likelihood, log_prior, logdet, theta.numel())
    return scale, evidence


def run_laplace(model, x: torch.Tensor, y: torch.Tensor, options: LaplaceOptions) -> Posterior:
    r"""Fit the Laplace approximation :math:`\mathcal{N}(\theta_{MAP}, \Lambda^{-1})` and return its draws.

    The fit works in float64 whatever the default dtype (the MAP polish and the factor of
    an ill-conditioned precision need it); the guide and draws come back in ``x``'s dtype.

    Returns
    -------
    Posterior
        With ``extras["guide"]`` the :class:`~bnn.guides.laplace.LaplaceGuide` and a linearisation,
        so ``posterior.predict(x, predictive="linearized")`` gives the GLM predictive, and a
        :class:`~bnn.inference.laplace.record.LaplaceRecord`.
    """
    hessian_type, tune_prior_precision = options.hessian, options.tune_prior_precision
    max_memory_gib = options.max_memory_gib
    num_samples, seed, progress = options.num_samples, options.seed, options.progress
    if options.link_approx is LinkApprox.BRIDGE and model.likelihood.task != "multiclass":
        raise ValueError(f"link_approx='bridge' maps the logits of two or more classes; this network's likelihood is "
                         f"{model.likelihood.task}: use link_approx='probit'")
    if hessian_type is HessianType.GGN:
        check_ggn_supported(model.likelihood)
    if options.structure is None:
        structure, structure_reason = choose_structure(model, x, hessian_type, WORKING_DTYPE.itemsize, max_memory_gib,
                                                       tempered=options.temperature != UNTEMPERED)
    else:
        structure, structure_reason = options.structure, "given"
        if structure is Structure.KRON:
            check_kron_supported(model, x)
    _check_temperature(model, structure, options.temperature)
    start = covered_from(model, structure)
    hierarchical = bool(model.hierarchical_sites)
    if hierarchical:  # their scales at the type-II maximum, a precision per group, replace the one multiplier
        check_type2_possible(model, hessian_type, structure, start, tune_prior_precision)
        tune_prior_precision = False
    if tune_prior_precision is None:  # the default: tuned wherever it can be, and never at a temperature
        tune_prior_precision = options.temperature == UNTEMPERED and _tunable_problem(model, start, hessian_type) is None
    if tune_prior_precision and (problem := _tunable_problem(model, start, hessian_type)):
        raise ValueError(problem)
    subnetwork_size = options.subnetwork_weights(model) if structure is Structure.SUBNETWORK else None
    check_memory(model, structure, WORKING_DTYPE.itemsize, max_memory_gib, subnetwork_size)
    evidence_structure = Structure.DIAG if structure is Structure.SUBNETWORK else structure  # module notes
    x_work, y_work = working_data(x, y)

    with seeded(seed):  # apart, so that the structure does not change the MAP's initial draw
        check_prior_curvature_possible(model, start)
    with seeded(seed):
        began = time.perf_counter()
        if hierarchical:
            type2 = type2_maximum(model, x_work, y_work, options, start, lambda network, at: _approximate(
                network, x_work, y_work, at, start, hessian_type, structure, False, False))
            estimate, scale, evidence, scales = type2.estimate, type2.scale, type2.log_marginal_likelihood, type2.scales
            map_seconds, refits, indices = time.perf_counter() - began, None, None
        else:
            refits = refits_affordable(model, x.shape[0]) if tune_prior_precision else None
            estimate = find_map(model, x_work, y_work, **options.map_fit_arguments(), progress=progress,
                                judged_from=start, multiplier=None if refits else options.temperature,
                                diagonal_evidence=evidence_structure is Structure.DIAG, kron_evidence=structure is Structure.KRON)
            if estimate.minibatch and refits:  # a MAP fitted on minibatches is not refitted either
                refits = False
            curvature = None
            if tune_prior_precision and not refits:  # the evidence at the MAP held fixed, its curvature formed once
                if structure is not Structure.KRON:
                    curvature = likelihood_curvature(model, x_work, y_work, estimate.theta, estimate.latents,
                                                     hessian_type=hessian_type, structure=evidence_structure,
                                                     progress=progress)
                choice = posthoc_multiplier(model, x_work, estimate, start, evidence_structure, curvature)
                estimate = dataclasses.replace(estimate, multiplier=choice.multiplier,
                                               evidence_evaluations=choice.evaluations,
                                               evidence_bracketed=choice.bracketed)
            map_seconds = time.perf_counter() - began
            indices = None
            if structure is Structure.SUBNETWORK:
                indices, curvature = subnetwork_curvature(model, x_work, estimate, subnetwork_size, diagonal=curvature,
                                                          progress=progress)
            scale, evidence = _approximate(model, x_work, y_work, estimate, start, hessian_type, structure,
                                           tune_prior_precision, progress, curvature, indices)
            if options.temperature != UNTEMPERED:  # (H + T P)^-1 at the mode of log p + T log prior, times T
                scale, evidence = scale * math.sqrt(options.temperature), math.nan
            type2, scales = None, {}
        train_seconds = time.perf_counter() - began
        multiplier = estimate.multiplier / options.temperature  # the prior's, alpha (the MAP ran at alpha T)
        constants = {name: value.to(x.dtype) for name, value in {**estimate.latents, **scales}.items()}
        guide = LaplaceGuide(model.sites, estimate.theta.to(x.dtype), scale.to(x.dtype), covered_from=start,
                             indices=indices, constants=constants)
        draws = sample_guide(guide, num_samples, model.latent_shapes, x, y)
    record = LaplaceRecord(
        guide="laplace", seed=seed, train_seconds=train_seconds, options=options, map_seconds=map_seconds,
        num_weights_covered=guide.covered_part(guide.mean).shape[0],
        subnetwork_indices=None if indices is None else indices.tolist(), structure=structure.value,
        structure_reason=structure_reason,
        map_lbfgs_iterations=estimate.lbfgs_iterations, map_grad_norm=estimate.grad_norm,
        map_converged=estimate.converged, map_at_kink=estimate.at_kink, map_stalled=estimate.stalled,
        map_last_rise=estimate.last_rise,
        map_noise_ratio=estimate.noise_ratio,
        map_newton_decrement=estimate.newton_decrement, map_polish=estimate.polish,
        log_marginal_likelihood=evidence, prior_precision=_gaussian_precisions(model, start, multiplier),
        prior_precision_multiplier=multiplier, tune_prior_precision=tune_prior_precision,
        evidence_rounds=estimate.evidence_evaluations, evidence_converged=estimate.evidence_bracketed,
        evidence_refits=refits,
        noise=estimate.latents["sigma"].item() if "sigma" in estimate.latents else None,
        hierarchical_scales=type2 and type2.group_scales,
        hierarchical_scales_method=DESCRIPTION if type2 else None, type2_rounds=type2 and type2.rounds,
        type2_converged=type2 and type2.converged,
    )
    samples = {name: value.unsqueeze(0) for name, value in draws.items()}
    # a likelihood without the closed form (the heteroscedastic Gaussian) predicts by Monte Carlo from the draws
    linearization = Linearization(guide, options.link_approx.value) if is_linearizable(model.likelihood) else None
    return Posterior(model, samples, x, y, record, extras={"guide": guide}, linearization=linearization,
                     constants=scales)
