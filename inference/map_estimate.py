r"""The maximum a posteriori weights :math:`\theta_{MAP}`, the centre of a Laplace approximation.

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta, \sigma) + \alpha \log p(\theta)

over the flat weight vector (:mod:`bnn.guides.flat_weights`), starting from a draw of the
prior: Adam on the per-datum objective, then a polish until the Newton decrement
:math:`\delta = \sqrt{g^\top \Lambda^{-1} g}` (:mod:`bnn.inference.gauss_newton`; :math:`g` the log joint's
gradient, :math:`\Lambda` its Gauss-Newton precision) is at most ``tolerance``: the mode then lies, to second
order, within ``tolerance`` posterior standard deviations. The polish is Levenberg-Marquardt on the
Gauss-Newton precision where the likelihood has a GGN and a step is affordable
(:func:`~bnn.inference.gauss_newton.uses_gauss_newton`), else L-BFGS (strong Wolfe
line search; :math:`\delta` then from the diagonal of :math:`\Lambda`).

**The noise.** A Gaussian likelihood's learned noise :math:`\sigma` cannot be fitted with the weights: the log
joint grows without bound as :math:`\sigma \to 0` wherever the network can interpolate its training data
(measured: on Boston housing, 455 rows and 751 weights, the maximum-likelihood noise fell to 0.014 standardised
units at the mode and kept falling). So :math:`\sigma` is held while the weights are fitted, and chosen by the
Laplace evidence :math:`p(y \mid x, \sigma, \alpha)` (:mod:`bnn.inference.evidence`), a bounded objective that
charges the weights the fit uses: the weights and noise are :math:`\theta_{MAP}` and :math:`\sigma` at the
maximum over :math:`\lambda = \alpha\sigma^2` of the evidence, the MAP refitted at each :math:`\lambda`
(:mod:`bnn.inference.evidence_search`). The prior precision multiplier :math:`\alpha` is the model's (1) unless
``multiplier=None`` asks for it to be chosen by the evidence too (the Laplace fit's default). The evidence needs a
Gaussian prior on the covered weights; under another prior a learned noise is fitted by maximum likelihood with
the weights (Adam and L-BFGS on :math:`\log\sigma`, reset to :math:`\hat\sigma^2 = \frac{1}{nK}\sum (y - f)^2` after
each Levenberg-Marquardt step), and a collapse of it is reported.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pyro
import torch
from bnn.guides.flat_weights import join_sites, num_weights, split_flat
from bnn.inference.evidence import (
    gaussian_log_prior,
    hyperparameters_on_line,
    laplace_log_marginal_likelihood,
    log_determinant,
)
from bnn.inference.evidence_search import MAX_STEPS, maximize_on_log_scale
from bnn.inference.gauss_newton import (
    elementwise_curvature,
    levenberg_marquardt,
    log_joint_precision,
    newton_decrement,
    uses_gauss_newton,
)
from bnn.inference.output_curvature import gauss_newton_matrix
from bnn.inference.progress import progress_bar
from bnn.inference.record import FitRecord
from bnn.models.priors import GaussianPrior

from bnn.stacklevel import user_stacklevel

LBFGS_HISTORY = 100
LBFGS_CHECK_EVERY = 50
"""L-BFGS iterations between two checks of the Newton decrement."""
LBFGS_TOLERANCE_CHANGE = 1e-14
RAISE_BUDGET = "raise map_max_iter or map_steps (or map_lr), or loosen map_tolerance"
MAP_STEPS, MAP_LR, MAP_TOLERANCE, MAP_MAX_ITER = 1000, 0.01, 0.1, 1000
"""The defaults of every MAP fit: Adam's steps and rate, the largest Newton decrement accepted (posterior standard
deviations) and the polish's iterations at most."""
SEARCH_TOLERANCE = 1.0
r"""The Newton decrement each refit of the evidence search stops at (unless ``tolerance`` is looser): within one
posterior standard deviation of its mode, where the log joint is :math:`\delta^2/2 \le 1/2` nat below the mode's
to second order. The search adds that back, so it compares evidences at the modes to within the third-order
remainder (exact for a linear-Gaussian model; measured within about 1/2 nat on a 1-20-1 network); the MAP at the
values chosen is then polished to ``tolerance``."""
KINK_ADVICE = ("it stopped at a kink, where the log joint falls along its own gradient (a ReLU unit switching exactly "
               "at training inputs makes the gradient one-sided): no step raises it and a larger budget will not help; "
               "the Laplace approximation there uses one side's curvature. A smooth activation (tanh) avoids kinks")
STALL_ADVICE = ("the polish stalled: at the rise of the log joint of its last steps it would not reach map_tolerance "
                "within map_max_iter (near a ReLU network's kinks the steps that raise it shrink toward zero); raise "
                "map_max_iter far above the iterations taken, loosen map_tolerance, or use a smooth activation (tanh)")
KINK_STEP = 1e-8
r"""The step along the normalised gradient that :func:`falls_along_gradient` tries: its gain
:math:`\epsilon\lVert g\rVert` is far above float64 round-off of a log joint in the thousands, its loss to a
curvature :math:`h`, :math:`\epsilon^2 h / 2`, far below it for :math:`h` up to :math:`10^7`."""
NO_MAXIMUM_FIX = "give the noise (a fixed likelihood scale) or the prior precision (tune_prior_precision=False)"
COLLAPSE_FIX = "use a Gaussian prior (the noise is then chosen by the Laplace evidence) or a fixed noise"


@dataclass(frozen=True)
class MapEstimate:
    r"""The MAP weights and what the Laplace approximation needs at them.

    Attributes
    ----------
    theta : torch.Tensor
        :math:`\theta_{MAP}`, shape ``(D,)``.
    latents : dict
        The likelihood's latent sites at their maximum-likelihood value (``{"sigma": ...}``) or ``{}``.
    log_likelihood, log_prior : float
        :math:`\log p(y \mid x, \theta_{MAP})` and :math:`\log p(\theta_{MAP})`.
    grad_norm : float
        :math:`\lVert \nabla_\theta [\log p(y \mid x, \theta) + \log p(\theta)] \rVert_2` at :math:`\theta_{MAP}`
        over the judged entries.
    newton_decrement : float
        :math:`\delta` there (module notes), in posterior standard deviations.
    polish : str
        ``"levenberg-marquardt"`` or ``"lbfgs"``.
    lbfgs_iterations : int
        Iterations the polish took.
    converged : bool
        Whether :math:`\delta` is at most the tolerance (else a ``RuntimeWarning`` was issued).
    multiplier : float
        :math:`\alpha`, held or chosen by the evidence.
    evidence_evaluations : int, optional
        MAP refits of the evidence search (``None``: nothing was chosen by the evidence).
    evidence_bracketed : bool, optional
        Whether that search found a maximum (else a ``RuntimeWarning`` was issued).
    at_kink : bool
        Whether the log joint falls along its own gradient at :math:`\theta_{MAP}` (:func:`falls_along_gradient`):
        a point where it is not differentiable, such as a ReLU unit switching exactly at training inputs. There the
        gradient is one-sided, the Newton decrement (which assumes a smooth log joint) stays large, and no larger
        budget brings it down.
    stalled : bool
        Whether the last polish stopped before its iteration limit without converging and not at a kink: its
        recent rise of the log joint, kept up, would not reach the tolerance within the limit
        (:mod:`bnn.inference.gauss_newton`), or L-BFGS stopped changing it.
    """

    theta: torch.Tensor
    latents: dict[str, torch.Tensor]
    log_likelihood: float
    log_prior: float
    grad_norm: float
    newton_decrement: float
    polish: str
    lbfgs_iterations: int
    converged: bool
    multiplier: float = 1.0
    evidence_evaluations: int | None = None
    evidence_bracketed: bool | None = None
    at_kink: bool = False
    stalled: bool = False


@dataclass(frozen=True)
class _Choice:
    """The hyper-parameters the evidence search chose, its MAP refits and whether it found a maximum."""

    multiplier: float
    noise: float | None
    evaluations: int
    bracketed: bool


@dataclass(kw_only=True)
class MapFitRecord(FitRecord):
    """What every fit centred on one MAP estimate records about it (the MAP method, Laplace).

    Attributes
    ----------
    map_steps, map_lbfgs_iterations : int
        Adam steps and iterations of the polish (Levenberg-Marquardt or L-BFGS, :attr:`map_polish`) of the MAP fit.
    map_grad_norm : float
        The norm of the log joint's gradient at the MAP (see :attr:`MapEstimate.grad_norm`).
    map_newton_decrement : float, optional
        The Newton decrement there, in posterior standard deviations (see :attr:`MapEstimate.newton_decrement`).
    map_polish : str, optional
        ``"levenberg-marquardt"`` or ``"lbfgs"``.
    map_converged : bool
        Whether the Newton decrement is at most the tolerance.
    noise : float, optional
        The noise scale of a learned Gaussian noise (module notes).
    map_at_kink : bool
        Whether the MAP stopped at a kink of the log joint (see :attr:`MapEstimate.at_kink`).
    map_stalled : bool
        Whether its polish stalled before its iteration limit (see :attr:`MapEstimate.stalled`).
    """

    map_steps: int
    map_lbfgs_iterations: int
    map_grad_norm: float
    map_converged: bool
    map_newton_decrement: float | None = None
    map_polish: str | None = None
    noise: float | None = None
    map_at_kink: bool = False
    map_stalled: bool = False

    @property
    def converged(self) -> bool:
        """Whether the MAP converged."""
        return self.map_converged

    def problems(self) -> list[str]:
        if self.map_converged:
            return []
        off = "" if self.map_newton_decrement is None else f"{self.map_newton_decrement:.3g} posterior sd from the mode, "
        return [f"the MAP did not converge (gradient norm {self.map_grad_norm:.3g}, {off}after {self.map_steps} Adam "
                f"steps and {self.map_lbfgs_iterations} {self.map_polish or 'polish'} iterations): "
                f"{_advice(self.map_at_kink, self.map_stalled)}"]


def _advice(at_kink: bool, stalled: bool) -> str:
    """What to do about a MAP that did not converge: nothing helps at a kink; a stalled polish needs far more."""
    return KINK_ADVICE if at_kink else STALL_ADVICE if stalled else RAISE_BUDGET


def log_prior(model, theta: torch.Tensor, distributions: dict | None = None) -> torch.Tensor:
    r""":math:`\log p(\theta)` under the model's priors (``distributions`` caches :func:`prior_distributions`)."""
    distributions = distributions or prior_distributions(model)
    values = split_flat(model.sites, theta)
    return sum(distributions[site.name].log_prob(values[site.name]).sum() for site in model.sites)


def prior_distributions(model) -> dict:
    """The prior distribution of every weight site, by site name."""
    return {site.name: model.prior[site.name].distribution(site) for site in model.sites}


def log_likelihood(model, x, y, theta: torch.Tensor, latents: dict[str, torch.Tensor]) -> torch.Tensor:
    r""":math:`\log p(y \mid x, \theta)` with the likelihood's latents at ``latents``."""
    return model.observation_distribution(x, {**split_flat(model.sites, theta), **latents}).log_prob(y).sum()


def _squared_error(model, x, y, theta: torch.Tensor) -> torch.Tensor:
    r""":math:`S(\theta) = \sum_{i,k} (y_{ik} - f_{ik})^2`."""
    with torch.no_grad():
        f = model.forward(x, split_flat(model.sites, theta))
        return (f - y.reshape(f.shape)).pow(2).sum()


def _ml_noise(model, x, y, theta: torch.Tensor) -> dict[str, torch.Tensor]:
    """The likelihood's latents at their maximum-likelihood values given the weights ``theta``
    (:meth:`~bnn.models.likelihoods.Likelihood.most_likely_latents`: a learned Gaussian noise's RMS residual)."""
    if not model.likelihood.latent_priors():
        return {}
    with torch.no_grad():
        return model.likelihood.most_likely_latents(model.forward(x, split_flat(model.sites, theta)), y)


def find_map(
    model, x: torch.Tensor, y: torch.Tensor, *, steps: int, lr: float, tolerance: float, progress: bool,
    max_iter: int = MAP_MAX_ITER, judged_from: int = 0, init: torch.Tensor | None = None,
    noise: torch.Tensor | None = None, multiplier: float | None = 1.0, diagonal_evidence: bool | None = None,
) -> MapEstimate:
    r"""Maximise the log joint over the flat weights, the noise and prior multiplier held or chosen by the evidence.

    .. math::

        \theta_{MAP} = \arg\min_\theta \; -\frac{1}{n}\big[\log p(y \mid x, \theta, \sigma) + \alpha\log p(\theta)\big]

    (module notes). Distribution argument checks are off inside: the data were validated at the edge, and
    every loss is checked for finiteness.

    Parameters
    ----------
    model : BayesianMLP
        The model; its priors give :math:`\log p(\theta)` and the starting draw.
    x, y : torch.Tensor
        The training data; the fit works in the dtype of ``x``.
    steps, lr : int, float
        Adam's steps and rate before the polish.
    tolerance : float
        The largest Newton decrement :math:`\delta` accepted as converged, in posterior standard deviations.
    progress : bool
        Show tqdm bars.
    max_iter : int
        Iterations of each polish at most (the final one, and each refit of an evidence search).
    judged_from : int
        With ``judged_from > 0`` (a Laplace approximation over the entries from there on, the
        rest held fixed) a second polish optimises those entries alone, and convergence is judged,
        and the gradient norm reported, on them only: the fixed entries may sit at a kink of their
        prior (zero under a Laplace prior) where no gradient vanishes and the polish stalls. The evidence
        covers those entries too.
    init : torch.Tensor, optional
        Start here instead of at a draw of the prior (then ``steps=0`` skips Adam).
    noise : torch.Tensor, optional
        Hold a learned noise :math:`\sigma` at this value; ``None`` chooses it by the evidence (module notes), or by
        maximum likelihood with ``multiplier=0`` (no prior term: the evidence is undefined).
    multiplier : float, optional
        :math:`\alpha` multiplying :math:`\log p(\theta)` (under a Gaussian prior, the prior precision scaled by
        :math:`\alpha`); ``None`` chooses it by the evidence (Gaussian priors on the covered weights only).
    diagonal_evidence : bool, optional
        Whether the evidence uses the diagonal of the GGN rather than the dense GGN; ``None``: the diagonal only
        where a Gauss-Newton step is unaffordable (:func:`~bnn.inference.gauss_newton.uses_gauss_newton`).

    Returns
    -------
    MapEstimate
        :math:`\theta_{MAP}`, the hyper-parameters and the terms of the log joint there (a ``RuntimeWarning`` when
        not converged, or when the search for the hyper-parameters found no maximum). The initial draw comes from
        the global random state (call it under :func:`bnn.inference.seeding.seeded`).

    Raises
    ------
    FloatingPointError
        When the objective or the final gradient is not finite.
    ValueError
        With ``multiplier=None`` under a prior that is not Gaussian on the covered weights.
    """
    if multiplier is None and not evidence_possible(model, judged_from):
        raise ValueError("multiplier=None (the prior precision chosen by the evidence) needs Gaussian priors on the "
                         "covered weights; pass a multiplier")
    with pyro.validation_enabled(False):
        return _find_map(model, x, y, steps, lr, tolerance, progress, max_iter, judged_from, init, noise, multiplier,
                         diagonal_evidence)


def evidence_possible(model, start: int) -> bool:
    """Whether the evidence of :mod:`bnn.inference.evidence` applies: a Gaussian prior on every entry from ``start``."""
    offset = 0
    for site in model.sites:
        if offset >= start and not isinstance(model.prior[site.name], GaussianPrior):
            return False
        offset += site.numel
    return True


class _Prior:
    r""":math:`\alpha \log p(\theta)`, its curvature, and the Gaussian base precision :math:`P` of the evidence."""

    def __init__(self, model, weight: float, distributions: dict | None = None) -> None:
        self.model, self.weight = model, weight
        self.distributions = distributions or prior_distributions(model)

    def reweighted(self, weight: float) -> _Prior:
        """The same prior with :math:`\alpha` = ``weight``."""
        return _Prior(self.model, weight, self.distributions)

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        return self.weight * log_prior(self.model, theta, self.distributions)

    def curvature(self, theta: torch.Tensor, start: int) -> torch.Tensor:
        r""":math:`-\alpha\,\partial^2 \log p(\theta_k) / \partial\theta_k^2` for the entries from ``start`` on."""
        values = split_flat(self.model.sites, theta)
        pieces = [elementwise_curvature(self.distributions[s.name], values[s.name]).reshape(-1) for s in self.model.sites]
        return self.weight * torch.cat(pieces)[start:]


class _Fit:
    """The data, the model and the settings of one :func:`find_map` call, and the pieces its stages share."""

    def __init__(self, model, x, y, judged_from: int, max_iter: int) -> None:
        self.model, self.x, self.y, self.judged_from, self.max_iter = model, x, y, judged_from, max_iter
        self.iterations, self.bar = 0, None  # the polish's progress bar, made once Adam is done
        self.stopped_early = False  # whether the last polish stopped before max_iter

    def latents(self, noise: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The likelihood's latents with the noise held at ``noise`` (``{}`` without a learned noise)."""
        return {} if noise is None else {"sigma": torch.as_tensor(noise, dtype=self.x.dtype)}

    def precision(self, theta, latents, prior: _Prior, start: int, diagonal: bool) -> torch.Tensor:
        """The Gauss-Newton precision of the log joint over the entries from ``start`` on."""
        return log_joint_precision(self.model, self.x, theta, latents, prior.curvature(theta, start), start=start,
                                   diagonal=diagonal)

    def polish(self, theta, prior: _Prior, latents_at, log_noise: dict, tolerance: float) -> torch.Tensor:
        """Polish all entries, then those from ``judged_from`` on (if any), until the decrement is at most
        ``tolerance``; ``latents_at(theta)`` gives the noise (held, or at its maximum-likelihood value),
        ``log_noise`` a learned noise L-BFGS fits with the weights (``{}`` when held)."""
        for begin in (0, self.judged_from) if self.judged_from else (0,):
            theta, taken = self._polish_from(theta, begin, prior, latents_at, log_noise, tolerance)
            self.iterations += taken
            self.stopped_early = taken < self.max_iter
        return theta

    def _polish_from(self, theta, begin, prior: _Prior, latents_at, log_noise, tolerance) -> tuple[torch.Tensor, int]:
        model, x, y = self.model, self.x, self.y

        def joint(weights: torch.Tensor, latents: dict) -> torch.Tensor:
            return log_likelihood(model, x, y, weights, latents) + prior.log_prob(weights)

        if uses_gauss_newton(model, x.shape[0], theta.shape[0] - self.judged_from):
            return levenberg_marquardt(joint, latents_at, lambda w, latents: self.precision(w, latents, prior, begin, False),
                                       theta, start=begin, tolerance=tolerance, max_iterations=self.max_iter,
                                       progress_bar=self.bar)
        fixed, block = theta[:begin], theta[begin:].clone().requires_grad_(True)
        optimiser = torch.optim.LBFGS(
            [block, *log_noise.values()], lr=1.0, max_iter=LBFGS_CHECK_EVERY, tolerance_grad=0.0,
            tolerance_change=LBFGS_TOLERANCE_CHANGE, history_size=LBFGS_HISTORY, line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            optimiser.zero_grad()
            weights = torch.cat([fixed, block])
            latents = {name: value.exp() for name, value in log_noise.items()} or latents_at(weights)
            loss = -joint(weights, latents) / x.shape[0]
            loss.backward()
            return loss

        def decrement(weights: torch.Tensor) -> float:
            latents = latents_at(weights)
            point = weights.clone().requires_grad_(True)
            with torch.enable_grad():
                (gradient,) = torch.autograd.grad(joint(point, latents), point)
            return newton_decrement(gradient[begin:], self.precision(weights, latents, prior, begin, True))

        done = 0
        while done < self.max_iter:
            optimiser.step(closure)
            taken = int(optimiser.state_dict()["state"][0]["n_iter"]) - done
            done += taken
            self.bar.update(taken)
            if taken < LBFGS_CHECK_EVERY or decrement(torch.cat([fixed, block.detach()])) <= tolerance:
                break
        return torch.cat([fixed, block.detach()]), done


def _adam(fit: _Fit, theta: torch.Tensor, prior: _Prior, latents: dict, log_noise: dict, steps: int, lr: float,
          progress: bool) -> torch.Tensor:
    """Adam's ``steps`` on the per-datum negative log joint from ``theta``, the noise held at ``latents`` or fitted
    as ``log_noise``."""
    model, x, y = fit.model, fit.x, fit.y
    theta = theta.clone().requires_grad_(True)
    adam = torch.optim.Adam([theta, *log_noise.values()], lr=lr)
    bar = progress_bar(range(steps), desc="MAP (Adam)", enabled=progress, leave=False)
    for step in bar:
        adam.zero_grad()
        noise = {name: value.exp() for name, value in log_noise.items()} or latents
        loss = -(log_likelihood(model, x, y, theta, noise) + prior.log_prob(theta)) / x.shape[0]
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"the MAP objective became {loss.item()} at Adam step {step}; lower map_lr (now {lr})")
        loss.backward()
        adam.step()
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4g}")
    bar.close()
    return theta.detach()


def _find_map(model, x, y, steps: int, lr: float, tolerance: float, progress: bool, max_iter: int, judged_from: int,
              init: torch.Tensor | None, noise: torch.Tensor | None, multiplier: float | None,
              diagonal_evidence: bool | None) -> MapEstimate:
    prior = _Prior(model, 1.0 if multiplier is None else multiplier)
    if init is None:
        init = join_sites(model.sites, {name: d.sample() for name, d in prior.distributions.items()})
    theta = init.detach().to(x.dtype)
    learned = bool(model.likelihood.latent_priors())
    fitted_noise = learned and noise is None  # a noise fitted with the weights (Adam's start) or chosen by the evidence
    log_noise = {"sigma": _ml_noise(model, x, y, theta)["sigma"].log().requires_grad_(True)} if fitted_noise else {}
    fit = _Fit(model, x, y, judged_from, max_iter)
    theta = _adam(fit, theta, prior, fit.latents(noise), log_noise, steps, lr, progress)
    bar = fit.bar = progress_bar(desc="MAP (polish)", unit="it", enabled=progress, leave=False)
    choice = None
    if multiplier is None or (fitted_noise and multiplier > 0 and evidence_possible(model, judged_from)):
        held = None if noise is None else float(noise)
        search = _EvidenceSearch(fit, prior, held, multiplier, learned=learned, diagonal=diagonal_evidence)
        theta, choice = search.run(theta, log_noise["sigma"].detach().exp().item() if fitted_noise else held, tolerance)
        noise, prior = choice.noise, prior.reweighted(choice.multiplier)
    elif fitted_noise:  # under a prior the evidence does not cover: the maximum-likelihood noise, watched for a collapse
        adam_noise = log_noise["sigma"].detach().exp().item()
        theta = fit.polish(theta, prior, lambda w: _ml_noise(model, x, y, w), log_noise, tolerance)
        bar.close()
        return _estimate(fit, theta, prior, _ml_noise(model, x, y, theta), tolerance, None, adam_noise=adam_noise)
    latents = fit.latents(noise)
    theta = fit.polish(theta, prior, lambda w: latents, {}, tolerance)
    bar.close()
    return _estimate(fit, theta, prior, latents, tolerance, choice)


class _EvidenceSearch:
    r"""The maximum of the Laplace evidence over :math:`\lambda = \alpha\sigma^2` (:mod:`bnn.inference.evidence`): at
    each :math:`\lambda` the MAP refitted, to :data:`SEARCH_TOLERANCE`, from the nearest MAP already found.

    ``noise`` is the learned noise held (``None`` to choose it; for a likelihood without a learned noise ``None``,
    and the line is :math:`\alpha = \lambda`), ``multiplier`` the multiplier held (``None`` to choose it).
    """

    def __init__(self, fit: _Fit, prior: _Prior, noise: float | None, multiplier: float | None, *, learned: bool,
                 diagonal: bool | None) -> None:
        self.fit, self.base, self.learned = fit, prior.reweighted(1.0), learned
        self.noise, self.multiplier = noise, multiplier
        covered = num_weights(fit.model.sites) - fit.judged_from
        self.diagonal = not uses_gauss_newton(fit.model, fit.x.shape[0], covered) if diagonal is None else diagonal
        self.fits: dict[float, torch.Tensor] = {}

    def hyperparameters(self, weight_decay: float, theta: torch.Tensor) -> tuple[float, float | None]:
        r""":math:`(\alpha, \sigma)` on the line of ``weight_decay`` at ``theta`` (``None`` for no learned noise)."""
        start = self.fit.judged_from
        penalty = float((self.base.curvature(theta, start) * theta[start:] ** 2).sum())
        fit, chosen_noise = self.fit, self.learned and self.noise is None
        # S(theta) enters only a noise chosen here (a likelihood without a learned noise may not be Gaussian)
        squared_error = float(_squared_error(fit.model, fit.x, fit.y, theta)) if chosen_noise else math.nan
        multiplier, noise = hyperparameters_on_line(
            weight_decay, squared_error=squared_error, penalty=penalty, targets=fit.y.numel(),
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
        precision = gauss_newton_matrix(fit.model, fit.x, theta, latents, start=start, diagonal=self.diagonal)
        (precision if self.diagonal else precision.diagonal()).add_(multiplier * base)
        to_mode = newton_decrement(gradient[start:], precision) ** 2 / 2
        return laplace_log_marginal_likelihood(likelihood_term.item() + to_mode,
                                               gaussian_log_prior(theta[start:], multiplier * base),
                                               log_determinant(precision), base.numel())

    def _evaluate(self, log_weight_decay: float, start: torch.Tensor, tolerance: float) -> float:
        nearest = min(self.fits, key=lambda u: abs(u - log_weight_decay), default=None)
        theta = start if nearest is None else self.fits[nearest]
        weight_decay = math.exp(log_weight_decay)
        multiplier, noise = self.hyperparameters(weight_decay, theta)
        latents = self.fit.latents(noise)
        theta = self.fit.polish(theta, self.base.reweighted(multiplier), lambda w: latents, {}, tolerance)
        self.fits[log_weight_decay] = theta
        return self.log_evidence(theta, *self.hyperparameters(weight_decay, theta))

    def run(self, theta: torch.Tensor, start_noise: float | None, tolerance: float) -> tuple[torch.Tensor, _Choice]:
        """Search from ``theta`` (Adam's weights) and :math:`\\lambda_0 = \\alpha_0\\sigma_0^2` (the held or start
        multiplier and noise); the best MAP found and the hyper-parameters there."""
        scale = 1.0 if start_noise is None else start_noise**2
        start = math.log((self.multiplier or 1.0) * scale)
        search_tolerance = max(tolerance, SEARCH_TOLERANCE)
        result = maximize_on_log_scale(lambda u: self._evaluate(u, theta, search_tolerance), start)
        best = self.fits[result.point]
        multiplier, noise = self.hyperparameters(math.exp(result.point), best)
        return best, _Choice(multiplier, noise, result.evaluations, result.bracketed)


def _estimate(fit: _Fit, theta, prior: _Prior, latents: dict, tolerance: float, choice: _Choice | None, *,
              adam_noise: float | None = None) -> MapEstimate:
    """The :class:`MapEstimate` at ``theta`` with the noise at ``latents``; warn when not converged, when the noise
    fitted by maximum likelihood fell tenfold below Adam's (``adam_noise``), or when the evidence had no maximum."""
    model, x, y, judged_from = fit.model, fit.x, fit.y, fit.judged_from
    point = theta.clone().requires_grad_(True)
    with torch.enable_grad():
        likelihood_term = log_likelihood(model, x, y, point, latents)
        prior_term = log_prior(model, point, prior.distributions)
        (gradient,) = torch.autograd.grad(likelihood_term + prior.log_prob(point), point)
    gradient = gradient[judged_from:]
    if not torch.isfinite(gradient).all():
        raise FloatingPointError("the MAP fit ended at non-finite values; lower map_lr or raise map_steps")
    polish = "levenberg-marquardt" if uses_gauss_newton(model, x.shape[0], theta.shape[0] - judged_from) else "lbfgs"
    decrement = newton_decrement(gradient, fit.precision(theta, latents, prior, judged_from, polish == "lbfgs"))
    if choice is not None and not choice.bracketed:
        warnings.warn(
            f"the Laplace evidence rose all the way to the end of the search (the weight decay alpha sigma^2 moved by "
            f"4^{MAX_STEPS} from its start): the prior precision multiplier {choice.multiplier:.4g} and the noise "
            f"{choice.noise} are where it stopped, not a maximum; {NO_MAXIMUM_FIX}",
            RuntimeWarning, stacklevel=user_stacklevel())
    at_kink = not decrement <= tolerance and falls_along_gradient(
        lambda w: log_likelihood(model, x, y, w, latents) + prior.log_prob(w), theta, judged_from)
    stalled = not decrement <= tolerance and not at_kink and fit.stopped_early
    if not decrement <= tolerance:
        collapse = ""
        if adam_noise is not None and float(latents["sigma"]) < adam_noise / 10:
            collapse = (f" The maximum-likelihood noise fell from {adam_noise:.3g} after Adam to "
                        f"{float(latents['sigma']):.3g}: the network interpolates its training data and the "
                        f"objective grows without bound as the noise goes to 0; {COLLAPSE_FIX}.")
        warnings.warn(
            f"the MAP polish ({polish}) stopped after {fit.iterations} iterations {decrement:.3g} posterior standard "
            f"deviations from the mode (Newton decrement > map_tolerance={tolerance:g}; gradient norm "
            f"{gradient.norm().item():.3g}): the MAP estimate (the Laplace approximation's centre, or a guide's start) "
            f"is off the mode; {_advice(at_kink, stalled)}.{collapse}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return MapEstimate(theta, latents, likelihood_term.item(), prior_term.item(), gradient.norm().item(), decrement,
                       polish, fit.iterations, decrement <= tolerance, prior.weight,
                       None if choice is None else choice.evaluations, None if choice is None else choice.bracketed,
                       at_kink, stalled)


def falls_along_gradient(log_joint, theta: torch.Tensor, start: int = 0) -> bool:
    r"""Whether ``log_joint`` falls along its autograd gradient :math:`g` (over the entries from ``start``) at ``theta``:
    :math:`\log p(\theta + \epsilon g / \lVert g\rVert) < \log p(\theta)` with :math:`\epsilon` = :data:`KINK_STEP`.

    Where the log joint is differentiable the left side is larger by
    :math:`\epsilon\lVert g\rVert - O(\epsilon^2 h)` (:math:`h` the curvature along :math:`g`, small at this
    :math:`\epsilon`); where it is smaller, the gradient is not the derivative from that side: a kink
    (:attr:`MapEstimate.at_kink`).
    """
    point = theta.clone().requires_grad_(True)
    with torch.enable_grad():
        value = log_joint(point)
        (gradient,) = torch.autograd.grad(value, point)
    gradient[:start] = 0
    norm = gradient.norm()
    if not norm > 0:
        return False
    with torch.no_grad():
        return float(log_joint(theta + KINK_STEP * gradient / norm)) < float(value)


def map_weights(model, x: torch.Tensor, y: torch.Tensor, *, steps: int = MAP_STEPS, lr: float = MAP_LR,
                tolerance: float = MAP_TOLERANCE) -> dict[str, torch.Tensor]:
    r"""The MAP value of every latent site of ``model`` on ``(x, y)``, a starting point for a guide.

    .. math::

        \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

    by :func:`find_map` (Adam for ``steps`` steps at rate ``lr`` from a prior draw, then a polish
    until the Newton decrement is at most ``tolerance``; a ``RuntimeWarning`` when it stops short), in
    float64 as the Laplace fit (float32 stalls the polish above the tolerance), split into the weight
    sites, plus a learned noise ``sigma`` as :func:`find_map` chooses it (the Laplace evidence's under a Gaussian
    prior; the maximum-likelihood noise, which can collapse, under another). SVI passes the result as a guide's
    ``init_loc`` when the guide options say ``init_loc="map"``; NUTS starts its chains there.

    Parameters
    ----------
    model : BayesianMLP
        The model whose latent sites are estimated.
    x, y : torch.Tensor
        The training data, all of it (the MAP of a minibatch is another point).
    steps, lr, tolerance
        Adam's steps and rate, and the largest Newton decrement (posterior standard deviations) the polish accepts.

    Returns
    -------
    dict of str to torch.Tensor
        Site name to value, shaped like the site, in the dtype of ``x``. Draws from torch's global
        random state (call it under :func:`bnn.inference.seeding.seeded`).
    """
    y_work = y.to(torch.float64) if y.is_floating_point() else y
    estimate = find_map(model, x.to(torch.float64), y_work, steps=steps, lr=lr, tolerance=tolerance, progress=False)
    values = {**split_flat(model.sites, estimate.theta), **estimate.latents}
    return {name: value.to(x.dtype) for name, value in values.items()}
