r"""The scales of hierarchical priors at their type-II maximum: the Laplace evidence over per-group prior precisions.

A Gaussian at the MAP cannot cover the funnel between a latent scale and its weights (a joint MAP over both sends
the scales to zero), so the Laplace fit does not integrate the scales of ``layer-scale`` and ``ard`` priors
(:mod:`bnn.models.hierarchical_priors`): it sets them to the maximum of the Laplace evidence, the empirical-Bayes
(type-II maximum likelihood) evidence approximation of MacKay (1992). Given the scales the weights' prior is Gaussian,
:math:`\theta_k \sim \mathcal{N}(0, 1/\lambda_{g(k)})`, one precision per group :math:`g`:

``layer-scale``
    one group per layer, :math:`\lambda = 1/\tau^2`;
``ard``
    one group per input column :math:`j` of the layer's weight, :math:`\lambda_j = 1/(\tau\lambda^{ARD}_j)^2`, and one
    for the layer's bias, :math:`1/\tau^2`. Given to the first layer, column :math:`j` holds every weight that
    reads input :math:`j`.

With :math:`\Lambda = H + \mathrm{diag}(\lambda_{g(k)})` the posterior precision at :math:`\theta_{MAP}` (the GGN
:math:`H`) and :math:`\Sigma = \Lambda^{-1}`, the evidence

.. math::

    \log p(\mathcal{D} \mid \lambda) \approx \log p(\mathcal{D} \mid \theta_{MAP})
    + \sum_g \Big[\frac{n_g}{2}\log\frac{\lambda_g}{2\pi} - \frac{\lambda_g}{2}\lVert\theta_g\rVert^2\Big]
    + \frac{D}{2}\log 2\pi - \frac{1}{2}\log\det\Lambda

is stationary in :math:`\lambda_g` (at fixed :math:`\theta_{MAP}` and :math:`H`) where

.. math::

    \lambda_g = \frac{\gamma_g}{\lVert\theta_g\rVert^2},\qquad
    \gamma_g = \sum_{k \in g} \big(1 - \lambda_g \Sigma_{kk}\big),

:math:`\gamma_g` the number of the group's weights the data determine. A learned Gaussian noise joins with
:math:`\sigma^2 = S(\theta_{MAP}) / (nK - \gamma)`, :math:`S` the residual sum of squares over :math:`nK` targets and
:math:`\gamma` the sum of :math:`1 - P_k\Sigma_{kk}` over the covered weights (:math:`P` the prior precision).
:func:`type2_maximum` iterates these fixed-point updates, refitting the MAP at each new precision from the last
(MacKay's scheme), until no precision and no noise moves by more than :data:`TOLERANCE` on a log scale. For a
linear-Gaussian model the Laplace evidence is the exact marginal likelihood
:math:`\mathcal{N}(y; 0, \sigma^2 I + X \Lambda_0^{-1} X^\top)`, and the fixed point is its stationary point.

**No hyperprior.** The half-Cauchy hyperprior of a scale is not added (this is type-II maximum likelihood, not type-II
MAP): a density on a scale is not invariant to reparameterisation (the maximum of evidence plus log hyperprior
moves when the scale is written as a precision or a log-scale), and the half-Cauchy's density is largest at zero.
The hyperprior's scale :math:`s` serves as the start, every group at scale :math:`s` (the half-Cauchy's median).

**Pruned groups.** The evidence of an input that does not help predict has no finite maximum: its precision grows
without bound (its weights go to zero). A group's scale is held within a factor :data:`SCALE_RANGE` of its start; one
driven below it is held there and counts as settled, its weights then negligible.

The horseshoe's per-weight local scales are not offered: one free precision per weight at its type-II maximum is the
relevance vector machine's degenerate case (each weight's precision goes to infinity or to a finite value fitted
to that one weight, with no shrinkage left to share), so the Laplace refuses it (:mod:`bnn.inference.laplace`).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyro.distributions as dist
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.core.hierarchical_refusal import HIERARCHICAL_METHODS
from bnn.inference.laplace.curvature import HessianType, Structure
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.laplace.prior_curvature import prior_curvature
from bnn.inference.map_search.log_joint import log_likelihood, log_prior, squared_error
from bnn.inference.map_search.map_estimate import MapEstimate, find_map
from bnn.models.hierarchical_priors import RELEVANCE, SCALE, ARDPrior, LayerScalePrior
from bnn.models.priors import Prior
from bnn.models.sites import WeightSite

from bnn.runtime.stacklevel import user_stacklevel

TOLERANCE = 1e-4
"""The largest change of a log precision (or of the log noise) in the last round for the fixed point to count as
reached: the precisions are then settled to 0.01%."""
EVIDENCE_TOLERANCE = 1e-3
"""The rise of the highest evidence (nats) that counts as progress: far below the evidence's own error."""
PATIENCE = 10
"""Rounds in a row without progress after which the rounds stop (:func:`type2_maximum`)."""
MAX_ROUNDS = 300
"""Fixed-point rounds (MAP refits) at most; a fit that reaches it is marked not converged and warned about."""
SCALE_RANGE = 1e4
"""A group's scale stays within this factor of its start either way (module notes: pruned groups)."""
DESCRIPTION = ("the scales of the hierarchical priors are set to their type-II maximum (the Laplace evidence, per "
               "group: MacKay's fixed point, the MAP refitted at each round; no hyperprior), not integrated")
"""What the record says about the scales."""
OFFERED = (LayerScalePrior, ARDPrior)
"""The hierarchical priors whose scales the Laplace fit sets by the evidence."""


class FixedPrecisionPrior(Prior):
    r""":math:`\theta_k \sim \mathcal{N}(0, 1/\lambda_k)` with a given precision per entry of one site: a hierarchical
    prior with its scales fixed. Internal to the type-II fit (not registered, so not saved)."""

    def __init__(self, precision: torch.Tensor) -> None:
        self.precision = precision

    def distribution(self, site: WeightSite) -> dist.Distribution:
        return dist.Normal(torch.zeros((), dtype=self.precision.dtype), self.precision.rsqrt().reshape(site.shape))


@dataclass(frozen=True)
class LayerGroups:
    """The precision groups of one layer with a hierarchical prior.

    Attributes
    ----------
    layer : str
        The layer (``layers.0``).
    prior : LayerScalePrior or ARDPrior
        Its prior.
    indices : tuple of torch.Tensor
        The positions in the flat weight vector of each group's weights: one group for ``layer-scale``; for ``ard``
        one per input column of the weight, then the bias (and any other site of the layer) if it has one.
    labels : tuple of str
        What the record calls the groups: the layer (``layer-scale``); the weight site, for its columns, and the other
        sites (``ard``).
    columns : int
        The ARD columns among the groups (0 for ``layer-scale``).
    """

    layer: str
    prior: LayerScalePrior | ARDPrior
    indices: tuple[torch.Tensor, ...]
    labels: tuple[str, ...]
    columns: int = 0

    def group_scales(self, precisions: torch.Tensor) -> dict[str, float | list[float]]:
        r"""The prior standard deviation :math:`\lambda_g^{-1/2}` of each group's weights, JSON-able, by label (the
        weight site's columns as one list)."""
        scales = precisions.rsqrt().tolist()
        if not self.columns:
            return {self.labels[0]: scales[0]}
        return {self.labels[0]: scales[: self.columns], **dict(zip(self.labels[1:], scales[self.columns:], strict=True))}

    def scale_values(self, precisions: torch.Tensor) -> dict[str, torch.Tensor]:
        r"""The values of the layer's scale sites at the groups' ``precisions``: :math:`\tau = \lambda^{-1/2}`; for ARD
        :math:`\tau` from the bias group (the hyperprior's scale without one) and :math:`\lambda^{ARD}_j` the column's
        scale over :math:`\tau`."""
        scales = precisions.rsqrt()
        if not self.columns:
            return {f"{self.layer}.{SCALE}": scales[0]}
        tau = scales[-1] if len(self.indices) > self.columns else scales.new_tensor(self.prior.global_scale)
        return {f"{self.layer}.{SCALE}": tau, f"{self.layer}.{RELEVANCE}": scales[: self.columns] / tau}


def _offsets(sites: Sequence[WeightSite]) -> dict[str, int]:
    offsets, offset = {}, 0
    for site in sites:
        offsets[site.name] = offset
        offset += site.numel
    return offsets


def precision_groups(model) -> list[LayerGroups]:
    """The precision groups of every layer of ``model`` with a ``layer-scale`` or ``ard`` prior (module notes)."""
    offsets, layers = _offsets(model.sites), {}
    for site in model.sites:
        if site.name in model.hierarchical_sites:
            layers.setdefault(site.group, []).append(site)
    groups = []
    for layer, members in layers.items():
        prior = model.hierarchical_sites[members[0].name]
        entries = {site.name: torch.arange(offsets[site.name], offsets[site.name] + site.numel) for site in members}
        if isinstance(prior, LayerScalePrior):
            groups.append(LayerGroups(layer, prior, (torch.cat(list(entries.values())),), (layer,)))
            continue
        weight = next(site for site in members if len(site.shape) == 2)
        in_features = weight.shape[1]
        columns = tuple(entries[weight.name][column::in_features] for column in range(in_features))
        rest = [site.name for site in members if site is not weight]
        tau = (torch.cat([entries[name] for name in rest]),) if rest else ()
        groups.append(LayerGroups(layer, prior, columns + tau, (weight.name, *([", ".join(rest)] if rest else [])),
                                  in_features))
    return groups


def check_type2_possible(model, hessian_type: HessianType, structure: Structure, start: int,
                         tune_prior_precision: bool | None) -> None:
    """Refuse, before any work, what the type-II scales cannot serve: a hierarchical prior other than ``layer-scale``
    and ``ard``, the exact Hessian, a structure that leaves a hierarchical layer out, and ``tune_prior_precision=True``
    (``structure='kron'`` is refused before, by
    :func:`~bnn.inference.curvature.kron_curvature.check_kron_supported`: its factors take one Gaussian prior
    precision per site)."""
    others = sorted({type(prior).__name__ for prior in model.hierarchical_sites.values() if not isinstance(prior, OFFERED)})
    if others:
        raise ValueError(f"the Laplace fit sets the scales of the hierarchical priors 'layer-scale' and 'ard' to their "
                         f"type-II maximum, not those of {others}; use {HIERARCHICAL_METHODS}")
    if hessian_type is HessianType.EXACT:
        raise ValueError("the type-II scales of hierarchical priors need a positive semi-definite curvature for the "
                         "evidence's fixed point; use hessian='ggn'")
    if structure is Structure.SUBNETWORK:
        raise ValueError("structure='subnetwork' holds the weights outside it at their MAP, and the evidence that sets "
                         "the hierarchical priors' scales needs them all; use structure='full' or 'diag'")
    offsets = _offsets(model.sites)
    outside = sorted({site.group for site in model.sites if site.name in model.hierarchical_sites
                      and offsets[site.name] < start})
    if outside:
        raise ValueError(f"structure={structure.value!r} leaves out the layers {outside}, whose hierarchical priors' "
                         "scales the evidence sets; use structure='full' or 'diag'")
    if tune_prior_precision:
        raise ValueError("tune_prior_precision=True scales every prior precision by one multiplier; with hierarchical "
                         "priors the evidence sets a precision per group instead (their type-II scales): leave "
                         "tune_prior_precision unset")


def fixed_prior_network(model, groups: Sequence[LayerGroups], precisions: Sequence[torch.Tensor]):
    """A copy of ``model`` whose hierarchical priors are replaced by :class:`FixedPrecisionPrior` at the groups'
    ``precisions`` (the rest of its priors kept)."""
    per_entry = torch.full((sum(site.numel for site in model.sites),), math.nan, dtype=torch.float64)
    for layer, layer_precisions in zip(groups, precisions, strict=True):
        for index, precision in zip(layer.indices, layer_precisions, strict=True):
            per_entry[index] = precision
    entries = split_flat(model.sites, per_entry)
    network = copy.copy(model)
    network.prior = {site.name: FixedPrecisionPrior(entries[site.name]) if site.name in model.hierarchical_sites
                     else model.prior[site.name] for site in model.sites}
    return network


def posterior_variances(scale: torch.Tensor) -> torch.Tensor:
    r""":math:`\Sigma_{kk}` from the covariance factor :math:`S` (:math:`SS^\top = \Sigma`, or its diagonal
    :math:`\Sigma^{1/2}`)."""
    return scale.square().sum(-1) if scale.dim() == 2 else scale.square()


@dataclass(frozen=True)
class Type2Fit:
    r"""One round of :func:`type2_maximum`, and its outcome: the round with the highest evidence.

    Attributes
    ----------
    network : BayesianNetwork
        The model with its hierarchical priors fixed at the round's precisions (:func:`fixed_prior_network`).
    estimate : MapEstimate
        The MAP under those priors (and the round's noise).
    scale : torch.Tensor
        The covariance factor of :math:`\Lambda^{-1}` there.
    log_marginal_likelihood : float
        The Laplace evidence there.
    scales : dict of str to torch.Tensor
        The value of every scale site of the hierarchical priors (``layers.0.scale``, ``layers.0.relevance``).
    group_scales : dict of str to float or list of float
        The prior standard deviation of each group (:meth:`LayerGroups.group_scales`).
    rounds : int
        The round (its number; in the outcome, the rounds taken).
    converged : bool
        In the outcome, whether the rounds settled (:func:`type2_maximum`).
    warnings : list
        The warnings of the round's MAP refit, issued for the round kept.
    at_mode : float
        The evidence raised by :math:`g^\top\Sigma g / 2` (:func:`newton_mode`): its value at the mode to second order,
        what the rounds compare.
    """

    network: object
    estimate: MapEstimate
    scale: torch.Tensor
    log_marginal_likelihood: float
    scales: dict[str, torch.Tensor]
    group_scales: dict[str, float | list[float]]
    rounds: int
    converged: bool
    warnings: list
    at_mode: float


def newton_mode(network, x, y, estimate: MapEstimate, scale: torch.Tensor, start: int) -> tuple[torch.Tensor, float]:
    r"""The covered weights one Newton step from the MAP estimate, :math:`\theta + \Sigma g` (:math:`g` the log joint's
    gradient), and the log joint's rise to there, :math:`g^\top\Sigma g / 2`: the mode and its value to second order,
    exactly for a linear-Gaussian model. The polish stops within its tolerance of the mode, a fraction of a posterior
    standard deviation; a pruned group's weights are far smaller than that, and their size is what the update reads."""
    point = estimate.theta.clone().requires_grad_(True)
    with torch.enable_grad():
        joint = log_likelihood(network, x, y, point, estimate.latents) + log_prior(network, point)
        (gradient,) = torch.autograd.grad(joint, point)
    gradient = gradient[start:]
    step = scale @ (scale.T @ gradient) if scale.dim() == 2 else scale.square() * gradient
    return estimate.theta[start:] + step, float(gradient @ step) / 2


def _updated(groups, precisions, start_precisions, mode, variances, start: int) -> list[torch.Tensor]:
    """One fixed-point update of every group's precision (module notes), held within :data:`SCALE_RANGE` of its start
    (a group the data do not reach, :math:`0/0`, is pruned)."""
    updated = []
    for layer, layer_precisions, layer_start in zip(groups, precisions, start_precisions, strict=True):
        new = torch.empty_like(layer_precisions)
        for number, index in enumerate(layer.indices):
            determined = index.numel() - layer_precisions[number] * variances[index - start].sum()
            new[number] = determined.clamp(min=0) / mode[index - start].square().sum()
        updated.append(new.nan_to_num(nan=math.inf).clamp(layer_start / SCALE_RANGE**2, layer_start * SCALE_RANGE**2))
    return updated


def _refit(network, x, y, options: LaplaceOptions, start: int, init: torch.Tensor | None, noise: float | None):
    """The MAP under ``network``'s fixed priors with the noise held (Adam first, with its progress bars, only without
    ``init``); its warnings are returned, not issued, so that only those of the round kept reach the user."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimate = find_map(network, x, y, steps=options.map_steps if init is None else 0, lr=options.map_lr,
                            tolerance=options.map_tolerance, max_iter=options.map_max_iter,
                            progress=options.progress and init is None,
                            judged_from=start, init=init, noise=None if noise is None else torch.tensor(noise, dtype=x.dtype),
                            multiplier=1.0)
    return estimate, caught


def type2_maximum(model, x: torch.Tensor, y: torch.Tensor, options: LaplaceOptions, start: int,
                  approximate: Callable[[object, MapEstimate], tuple[torch.Tensor, float]]) -> Type2Fit:
    r"""The MAP, the noise and the per-group prior precisions where MacKay's updates (module notes) leave the
    Laplace evidence highest.

    The rounds stop at the fixed point (no log precision nor the log noise moves by more than :data:`TOLERANCE`), or
    once :data:`PATIENCE` rounds in a row have not raised the highest evidence by :data:`EVIDENCE_TOLERANCE` (a
    network's MAP moves between refits, and its evidence wanders by a fraction of a nat about the fixed point), and
    keep the round of the highest evidence (at the mode to second order, :func:`newton_mode`). Either counts as
    converged; :data:`MAX_ROUNDS` rounds without does not.

    Parameters
    ----------
    model : BayesianNetwork
        A network with ``layer-scale`` or ``ard`` priors (:func:`check_type2_possible` passed).
    x, y : torch.Tensor
        The training data, in the working dtype.
    options : LaplaceOptions
        The MAP fit's options (Adam's steps and rate for the first fit, the polish's tolerance and iterations).
    start : int
        The first covered entry of the flat weights.
    approximate : callable
        ``approximate(network, estimate) -> (scale, evidence)``: the Laplace fit's covariance factor and evidence at
        a MAP of ``network``.

    Returns
    -------
    Type2Fit
        The round kept, with the rounds taken; a ``RuntimeWarning`` when they did not converge. The first MAP's start
        is drawn from the global random state (call it under :func:`bnn.runtime.seeding.seeded`).
    """
    groups = precision_groups(model)
    start_precisions = [torch.full((len(layer.indices),), layer.prior.global_scale**-2, dtype=torch.float64)
                        for layer in groups]
    precisions = start_precisions
    learned = bool(model.likelihood.latent_priors())
    noise = float(y.std()) if learned else None  # the noise of a network that explains nothing: the start
    network = fixed_prior_network(model, groups, precisions)
    estimate, caught = _refit(network, x, y, options, start, None, noise)
    best, stale, settled = None, 0, False
    for rounds in range(1, MAX_ROUNDS + 1):
        scale, evidence = approximate(network, estimate)
        mode, to_mode = newton_mode(network, x, y, estimate, scale, start)
        by_layer = list(zip(groups, precisions, strict=True))
        scales = {name: value for layer, values in by_layer for name, value in layer.scale_values(values).items()}
        group_scales = {name: value for layer, values in by_layer for name, value in layer.group_scales(values).items()}
        current = Type2Fit(network, estimate, scale, evidence, scales, group_scales, rounds, False, caught,
                           evidence + to_mode)
        stale = 0 if best is None or current.at_mode > best.at_mode + EVIDENCE_TOLERANCE else stale + 1
        best = current if best is None or current.at_mode > best.at_mode else best
        variances = posterior_variances(scale)
        new = _updated(groups, precisions, start_precisions, mode, variances, start)
        moves = [float((a.log() - b.log()).abs().max()) for a, b in zip(new, precisions, strict=True)]
        if learned:
            determined = float((1 - prior_curvature(network, estimate.theta, start) * variances).sum())
            new_noise = math.sqrt(float(squared_error(model, x, y, estimate.theta)) / max(y.numel() - determined, 1.0))
            moves.append(abs(math.log(new_noise / noise)))
            noise = new_noise
        settled = max(moves) <= TOLERANCE or stale >= PATIENCE
        if settled:
            break
        precisions, network = new, fixed_prior_network(model, groups, new)
        estimate, caught = _refit(network, x, y, options, start, estimate.theta, noise)
    for warning in best.warnings:
        warnings.warn(warning.message, warning.category, stacklevel=user_stacklevel())
    if not settled:
        warnings.warn(f"the type-II scales of the hierarchical priors did not settle in {MAX_ROUNDS} fixed-point rounds "
                      f"(the last moved a log precision or the log noise by {max(moves):.3g} > {TOLERANCE:g}, and the "
                      f"evidence still rose): they are those of the highest evidence met, not its maximum; fit the "
                      "scales with svi (guide='autonormal') or nuts, or give those layers a fixed prior",
                      RuntimeWarning, stacklevel=user_stacklevel())
    return replace(best, rounds=rounds, converged=settled)
