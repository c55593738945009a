r"""The prior precision multiplier :math:`\alpha` and a learned noise :math:`\sigma` chosen by the Laplace
evidence: the maximum over :math:`\lambda = \alpha\sigma^2`, the MAP refitted at each :math:`\lambda`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.guides.flat_weights import num_weights
from bnn.inference.curvature.evidence import (
    gaussian_log_prior,
    hyperparameters_on_line,
    laplace_log_marginal_likelihood,
    log_determinant,
)
from bnn.inference.curvature.evidence_search import maximize_on_log_scale
from bnn.inference.curvature.gauss_newton import newton_decrement, uses_gauss_newton
from bnn.inference.curvature.kron_curvature import kron_posterior
from bnn.inference.curvature.output_curvature import gauss_newton_matrix
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood, squared_error
from bnn.inference.map_search.polish import MapProblem

SEARCH_TOLERANCE = 1.0
r"""The Newton decrement each refit of the evidence search stops at (unless ``tolerance`` is looser): within one
posterior standard deviation of its mode, where the log joint is :math:`\delta^2/2 \le 1/2` nat below the mode's
to second order. The search adds that back, so it compares evidences at the modes to within the third-order
remainder (exact for a linear-Gaussian model; on a 1-20-1 network the noise chosen is a maximum of the evidence to
within 1 nat, ``tests/inference/map_search/test_map_estimate.py``); the MAP at the values chosen is then polished to
``tolerance``."""


@dataclass(frozen=True)
class HyperparameterChoice:
    """The hyper-parameters the evidence search chose, its MAP refits and whether it found a maximum."""

    multiplier: float
    noise: float | None
    evaluations: int
    bracketed: bool


class EvidenceSearch:
    r"""The maximum of the Laplace evidence over :math:`\lambda = \alpha\sigma^2`
    (:mod:`bnn.inference.curvature.evidence`): at
    each :math:`\lambda` the MAP refitted, to :data:`SEARCH_TOLERANCE`, from the nearest MAP already found.

    ``noise`` is the learned noise held (``None`` to choose it; for a likelihood without a learned noise ``None``,
    and the line is :math:`\alpha = \lambda`), ``multiplier`` the multiplier held (``None`` to choose it). The
    evidence's precision is the dense GGN, its diagonal (``diagonal``) or its Kronecker factors (``kron``; the
    covered entries are then every weight).
    """

    def __init__(self, fit: MapProblem, prior: ScaledPrior, noise: float | None, multiplier: float | None, *, learned: bool,
                 diagonal: bool | None, kron: bool = False) -> None:
        self.fit, self.base, self.learned = fit, prior.reweighted(1.0), learned
        self.noise, self.multiplier = noise, multiplier
        covered = num_weights(fit.model.sites) - fit.judged_from
        self.diagonal = not uses_gauss_newton(fit.model, fit.x.shape[0], covered) if diagonal is None else diagonal
        self.kron = kron
        self.fits: dict[float, torch.Tensor] = {}

    def hyperparameters(self, weight_decay: float, theta: torch.Tensor) -> tuple[float, float | None]:
        r""":math:`(\alpha, \sigma)` on the line of ``weight_decay`` at ``theta`` (``None`` for no learned noise)."""
        start = self.fit.judged_from
        penalty = float((self.base.curvature(theta, start) * theta[start:] ** 2).sum())
        fit, chosen_noise = self.fit, self.learned and self.noise is None
        # S(theta) enters only a noise chosen here (a likelihood without a learned noise may not be Gaussian)
        residual_sum = float(squared_error(fit.model, fit.x, fit.y, theta)) if chosen_noise else math.nan
        multiplier, noise = hyperparameters_on_line(
            weight_decay, squared_error=residual_sum, penalty=penalty, targets=fit.y.numel(),
            noise=self.noise if self.learned else 1.0, multiplier=self.multiplier)
        return multiplier, noise if self.learned else None

    def log_evidence(self, theta: torch.Tensor, multiplier: float, noise: float | None) -> float:
        r"""The Laplace evidence at ``theta``'s mode under :math:`(\alpha, \sigma)`, over the covered entries.

        ``theta`` is a refit stopped within :data:`SEARCH_TOLERANCE` posterior standard deviations of the mode; the
        log joint there is raised by :math:`\delta^2 / 2`, its value at the mode to second order (exact where the
        log joint is quadratic), so the search compares values at the modes.
        """
        fit, start = self.fit, self.fit.judged_from
        latents = fit.latents(noise)
        base = self.base.curvature(theta, start)
        prior = self.base.reweighted(multiplier)
        point = theta.clone().requires_grad_(True)
        with torch.enable_grad():
            likelihood_term = log_likelihood(fit.model, fit.x, fit.y, point, latents)
            (gradient,) = torch.autograd.grad(likelihood_term + prior.log_prob(point), point)
        if self.kron:  # g^T Lambda^-1 g = |S^T g|^2
            covariance = kron_posterior(fit.model, fit.x, theta, latents, multiplier * base)
            to_mode = float(covariance.transposed_times(gradient[start:]).square().sum()) / 2
            logdet = covariance.logdet_precision()
        else:
            precision = gauss_newton_matrix(fit.model, fit.x, theta, latents, start=start, diagonal=self.diagonal)
            (precision if self.diagonal else precision.diagonal()).add_(multiplier * base)
            to_mode = newton_decrement(gradient[start:], precision) ** 2 / 2
            logdet = log_determinant(precision)
        return laplace_log_marginal_likelihood(likelihood_term.item() + to_mode,
                                               gaussian_log_prior(theta[start:], multiplier * base), logdet, base.numel())

    def _evaluate(self, log_weight_decay: float, start: torch.Tensor, tolerance: float) -> float:
        nearest = min(self.fits, key=lambda u: abs(u - log_weight_decay), default=None)
        theta = start if nearest is None else self.fits[nearest]
        weight_decay = math.exp(log_weight_decay)
        multiplier, noise = self.hyperparameters(weight_decay, theta)
        latents = self.fit.latents(noise)
        theta = self.fit.polish(theta, self.base.reweighted(multiplier), lambda w: latents, {}, tolerance)
        self.fits[log_weight_decay] = theta
        return self.log_evidence(theta, *self.hyperparameters(weight_decay, theta))

    def run(self, theta: torch.Tensor, start_noise: float | None, tolerance: float) -> tuple[torch.Tensor, HyperparameterChoice]:
        """Search from ``theta`` (Adam's weights) and :math:`\\lambda_0 = \\alpha_0\\sigma_0^2` (the held or start
        multiplier and noise); the best MAP found and the hyper-parameters there."""
        scale = 1.0 if start_noise is None else start_noise**2
        start = math.log((self.multiplier or 1.0) * scale)
        search_tolerance = max(tolerance, SEARCH_TOLERANCE)
        result = maximize_on_log_scale(lambda u: self._evaluate(u, theta, search_tolerance), start)
        best = self.fits[result.point]
        multiplier, noise = self.hyperparameters(math.exp(result.point), best)
        return best, HyperparameterChoice(multiplier, noise, result.evaluations, result.bracketed)
