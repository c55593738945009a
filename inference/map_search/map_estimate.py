r"""The maximum a posteriori weights :math:`\theta_{MAP}`, the centre of a Laplace approximation.

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta, \sigma) + \alpha \log p(\theta)

over the flat weight vector (:mod:`bnn.guides.flat_weights`), starting from a draw of the
prior: Adam on the per-datum objective, then a polish until the Newton decrement
:math:`\delta = \sqrt{g^\top \Lambda^{-1} g}` (:mod:`bnn.inference.curvature.gauss_newton`; :math:`g` the log joint's
gradient, :math:`\Lambda` its Gauss-Newton precision) is at most ``tolerance``: the mode then lies, to second
order, within ``tolerance`` posterior standard deviations. The polish is Levenberg-Marquardt on the
Gauss-Newton precision where the likelihood has a GGN and a step is affordable
(:func:`~bnn.inference.curvature.gauss_newton.uses_gauss_newton`), else L-BFGS (strong Wolfe
line search; in coordinates whitened by the Kronecker-factored precision where the network allows it,
:mod:`bnn.inference.map_search.polish`; :math:`\delta` then by conjugate gradients on :math:`\Lambda` matrix-free,
:mod:`bnn.inference.curvature.cg_decrement`). Where Levenberg-Marquardt stops short of the
tolerance (no damped step raises the log joint, or its recent rise would not reach the tolerance within the budget:
near the kinks of a ReLU network the Gauss-Newton model is poor), L-BFGS goes on from there for the rest of the
budget, started afresh wherever it ends itself (a line search that failed at a kink).

**At the kinks of a ReLU network** the decrement can stay large at the mode: its gradient there is one-sided and the
Gauss-Newton precision ignores the kinks. So the fit is also converged when the log joint has stopped rising: the
last window of :data:`~bnn.inference.map_search.polish.LBFGS_CHECK_EVERY` L-BFGS iterations (or fewer, where
L-BFGS ended itself; a window the budget cut short is not judged) raised it by at
most :math:`\text{tolerance}^2/2` nats, the rise still to come, to second order, from a point ``tolerance``
posterior standard deviations from the mode (:mod:`bnn.inference.curvature.gauss_newton`).

**The regime.** All this is the full-batch fit, run where it is cheap; elsewhere (large data, a costly network: its
work counted before it starts) the MAP is fitted on minibatches instead, as a plain training is, with no polish
(:mod:`bnn.inference.map_search.minibatch_map`), and :attr:`MapEstimate.polish` says which ran.

**The noise.** A Gaussian likelihood's learned noise :math:`\sigma` cannot be fitted with the weights: the log
joint grows without bound as :math:`\sigma \to 0` wherever the network can interpolate its training data
(``benchmarks/results/laplace_uci.md``). So :math:`\sigma` is held while the weights are fitted, and chosen by the
Laplace evidence :math:`p(y \mid x, \sigma, \alpha)` (:mod:`bnn.inference.curvature.evidence`), a bounded objective that
charges the weights the fit uses: the weights and noise are :math:`\theta_{MAP}` and :math:`\sigma` at the
maximum over :math:`\lambda = \alpha\sigma^2` of the evidence, the MAP refitted at each :math:`\lambda`
(:mod:`bnn.inference.curvature.evidence_search`). The prior precision multiplier :math:`\alpha` is the model's (1) unless
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
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference.core.full_batch_work import regime_rows
from bnn.inference.core.objective_trend import FLAT_SHARE
from bnn.inference.curvature.evidence_search import MAX_STEPS
from bnn.inference.curvature.gauss_newton import uses_gauss_newton
from bnn.inference.map_search.advice import COLLAPSE_FIX, MINIBATCH_FIX, NO_MAXIMUM_FIX, map_advice
from bnn.inference.map_search.gradient_noise import NOISE_RATIO, full_gradient
from bnn.inference.map_search.hyperparameter_search import EvidenceSearch, HyperparameterChoice
from bnn.inference.map_search.log_joint import ScaledPrior, evidence_possible, log_likelihood, log_prior, most_likely_noise
from bnn.inference.map_search.minibatch_map import (
    FULL_BATCH_GRADIENTS,
    MINIBATCH_POLISH,
    MinibatchFit,
    minibatch_map,
)
from bnn.inference.map_search.minibatch_map import (
    LR as BATCH_LR,
)
from bnn.inference.map_search.polish import LBFGS_CHECK_EVERY, MapProblem, adam_steps

from bnn.runtime.progress import progress_bar
from bnn.runtime.stacklevel import user_stacklevel

MAP_STEPS, MAP_LR, MAP_TOLERANCE = 1000, 0.01, 0.1
"""The defaults of every MAP fit: Adam's steps and rate, and the largest Newton decrement accepted (posterior standard
deviations); the polish's iterations at most are the polish's own
(:func:`~bnn.inference.map_search.polish.polish_budget`) unless the fit sets them."""
WORKING_DTYPE = torch.float64
"""The dtype every MAP fit works in, whatever the default: in float32 the polish stalls above the tolerance."""


def working_data(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` and a real-valued ``y`` in :data:`WORKING_DTYPE` (integer class labels stay as they are)."""
    return x.to(WORKING_DTYPE), (y.to(WORKING_DTYPE) if y.is_floating_point() else y)

KINK_STEP = 1e-8
r"""The step along the normalised gradient that :func:`falls_along_gradient` tries: its gain
:math:`\epsilon\lVert g\rVert` is far above float64 round-off of a log joint in the thousands, its loss to a
curvature :math:`h`, :math:`\epsilon^2 h / 2`, far below it for :math:`h` up to :math:`10^7`."""


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
        ``"levenberg-marquardt"``, ``"levenberg-marquardt, then lbfgs"`` (L-BFGS went on where Levenberg-Marquardt
        stopped short) or ``"lbfgs"``; L-BFGS in whitened coordinates is ``"lbfgs, kron-whitened"``.
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
        (:mod:`bnn.inference.curvature.gauss_newton`), or L-BFGS stopped changing it.
    last_rise : float, optional
        The rise of the log joint (nats) over the last whole window of L-BFGS iterations of the last polish
        (a window the budget cut short is not judged; ``None`` without a whole window); at most
        :math:`\text{tolerance}^2/2` counts as converged (module notes).
    minibatch : bool
        Whether the MAP was fitted on minibatches (:mod:`bnn.inference.map_search.minibatch_map`: no polish, no
        Newton decrement, the multiplier held).
    noise_ratio : float, optional
        A minibatch fit's full gradient against one batch's gradient noise at its end
        (:mod:`bnn.inference.map_search.gradient_noise`; ``None`` for a full-batch fit).
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
    last_rise: float | None = None
    minibatch: bool = False
    noise_ratio: float | None = None


def find_map(
    model, x: torch.Tensor, y: torch.Tensor, *, steps: int, lr: float, tolerance: float, progress: bool,
    max_iter: int | None = None, judged_from: int = 0, init: torch.Tensor | None = None,
    noise: torch.Tensor | None = None, multiplier: float | None = 1.0, diagonal_evidence: bool | None = None,
    kron_evidence: bool = False, batch_size: int | None = None, epochs: int | None = None, batch_lr: float = BATCH_LR,
) -> MapEstimate:
    r"""Maximise the log joint over the flat weights, the noise and prior multiplier held or chosen by the evidence.

    .. math::

        \theta_{MAP} = \arg\min_\theta \; -\frac{1}{n}\big[\log p(y \mid x, \theta, \sigma) + \alpha\log p(\theta)\big]

    (module notes). Distribution argument checks are off inside: the data were validated at the edge, and
    every loss is checked for finiteness.

    Parameters
    ----------
    model : BayesianNetwork
        The model; its priors give :math:`\log p(\theta)` and the starting draw.
    x, y : torch.Tensor
        The training data; the fit works in the dtype of ``x``.
    steps, lr : int, float
        Adam's steps and rate before the polish.
    tolerance : float
        The largest Newton decrement :math:`\delta` accepted as converged, in posterior standard deviations.
    progress : bool
        Show tqdm bars.
    max_iter : int, optional
        Iterations of each polish at most (the final one, and each refit of an evidence search); ``None``: the
        polish's own (:func:`~bnn.inference.map_search.polish.polish_budget`).
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
        where a Gauss-Newton step is unaffordable (:func:`~bnn.inference.curvature.gauss_newton.uses_gauss_newton`).
    kron_evidence : bool
        Whether the evidence uses the Kronecker-factored GGN (:mod:`bnn.inference.curvature.kron_curvature`;
        overrides ``diagonal_evidence``).
    batch_size : int, optional
        Rows per Adam step: at least the training rows for the full-batch fit above (Adam, then its polish and any
        evidence search); fewer for the minibatch fit of :mod:`bnn.inference.map_search.minibatch_map` (``epochs``
        epochs at most at rate ``batch_lr``; no polish, :math:`\alpha` held at 1 where ``multiplier=None``, a learned
        noise at its maximum-likelihood value). ``None``: the full batch where that fit is cheap
        (:func:`~bnn.inference.core.full_batch_work.full_batch_affordable`), else
        :data:`~bnn.inference.core.full_batch_work.BATCH_SIZE`; a network with hierarchical priors, whose scales
        a MAP fit does not cover, keeps the full batch.
    epochs : int, optional
        The minibatch fit's epochs (``None``: :func:`~bnn.inference.map_search.minibatch_map.minibatch_epochs`, at
        most 200 epochs and 32,000 steps).
    batch_lr : float
        The minibatch fit's peak Adam rate.

    Returns
    -------
    MapEstimate
        :math:`\theta_{MAP}`, the hyper-parameters and the terms of the log joint there (a ``RuntimeWarning`` when
        not converged, or when the search for the hyper-parameters found no maximum). The initial draw comes from
        the global random state (call it under :func:`bnn.runtime.seeding.seeded`).

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
                         diagonal_evidence, kron_evidence, (batch_size, epochs, batch_lr))


def map_batch_rows(model, x: torch.Tensor, y: torch.Tensor, steps: int, batch_size: int | None) -> int:
    """The rows per Adam step of a MAP fit (``find_map``'s ``batch_size``): the option's, else the full batch where it
    is cheap or the network has hierarchical priors, else the minibatch fit's default."""
    if batch_size is not None:
        return min(batch_size, x.shape[0])
    if model.hierarchical_sites:
        return x.shape[0]
    return regime_rows(model, x.shape[0], steps + FULL_BATCH_GRADIENTS)


def _find_map(model, x, y, steps: int, lr: float, tolerance: float, progress: bool, max_iter: int | None,
              judged_from: int, init: torch.Tensor | None, noise: torch.Tensor | None, multiplier: float | None,
              diagonal_evidence: bool | None, kron_evidence: bool, minibatch: tuple) -> MapEstimate:
    prior = ScaledPrior(model, 1.0 if multiplier is None else multiplier)
    if init is None:
        init = join_sites(model.sites, {name: d.sample() for name, d in prior.distributions.items()})
    theta = init.detach().to(x.dtype)
    learned = bool(model.likelihood.latent_priors())
    fitted_noise = learned and noise is None  # a noise fitted with the weights (Adam's start) or chosen by the evidence
    log_noise = {"sigma": most_likely_noise(model, x, y, theta)["sigma"].log().requires_grad_(True)} if fitted_noise else {}
    batch_size, epochs, batch_lr = minibatch
    rows = map_batch_rows(model, x, y, steps, batch_size)
    if rows < x.shape[0]:
        held = {} if fitted_noise else {name: torch.as_tensor(noise, dtype=x.dtype) for name in model.likelihood.latent_priors()}
        run = minibatch_map(model, x, y, prior, theta, held, log_noise, epochs=epochs, batch_size=rows, lr=batch_lr,
                            progress=progress)
        latents = most_likely_noise(model, x, y, run.theta) if fitted_noise else held
        return _minibatch_estimate(model, x, y, run, prior, latents, judged_from, rows)
    fit = MapProblem(model, x, y, judged_from, max_iter)
    theta = adam_steps(fit, theta, prior, fit.latents(noise), log_noise, steps, lr, progress)
    bar = fit.bar = progress_bar(desc="MAP (polish)", unit="it", enabled=progress, leave=False)
    choice = None
    if multiplier is None or (fitted_noise and multiplier > 0 and evidence_possible(model, judged_from)):
        held = None if noise is None else float(noise)
        search = EvidenceSearch(fit, prior, held, multiplier, learned=learned, diagonal=diagonal_evidence,
                                kron=kron_evidence)
        theta, choice = search.run(theta, log_noise["sigma"].detach().exp().item() if fitted_noise else held, tolerance)
        noise, prior = choice.noise, prior.reweighted(choice.multiplier)
    elif fitted_noise:  # under a prior the evidence does not cover: the maximum-likelihood noise, watched for a collapse
        adam_noise = log_noise["sigma"].detach().exp().item()
        theta = fit.polish(theta, prior, lambda w: most_likely_noise(model, x, y, w), log_noise, tolerance)
        bar.close()
        return _estimate(fit, theta, prior, most_likely_noise(model, x, y, theta), tolerance, None, adam_noise=adam_noise)
    latents = fit.latents(noise)
    theta = fit.polish(theta, prior, lambda w: latents, {}, tolerance)
    bar.close()
    return _estimate(fit, theta, prior, latents, tolerance, choice)


def _estimate(fit: MapProblem, theta, prior: ScaledPrior, latents: dict, tolerance: float, choice: HyperparameterChoice | None, *,
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
    dense = uses_gauss_newton(model, x.shape[0], theta.shape[0] - judged_from)
    lbfgs = "lbfgs, kron-whitened" if fit.whitened else "lbfgs"
    polish = (f"levenberg-marquardt, then {lbfgs}" if fit.handed_over else "levenberg-marquardt") if dense else lbfgs
    decrement = fit.decrement(theta, latents, prior, judged_from, gradient, tolerance)
    collapsed = adam_noise is not None and float(latents["sigma"]) < adam_noise / 10  # no maximum to converge to
    converged = not collapsed and (decrement <= tolerance or fit.stopped_rising(tolerance))
    if choice is not None and not choice.bracketed:
        warnings.warn(
            f"the Laplace evidence rose all the way to the end of the search (the weight decay alpha sigma^2 moved by "
            f"4^{MAX_STEPS} from its start): the prior precision multiplier {choice.multiplier:.4g} and the noise "
            f"{choice.noise} are where it stopped, not a maximum; {NO_MAXIMUM_FIX}",
            RuntimeWarning, stacklevel=user_stacklevel())
    at_kink = not decrement <= tolerance and falls_along_gradient(
        lambda w: log_likelihood(model, x, y, w, latents) + prior.log_prob(w), theta, judged_from)
    stalled = not converged and not at_kink and fit.stopped_early
    if not converged:
        collapse = ""
        if collapsed:
            collapse = (f" The maximum-likelihood noise fell from {adam_noise:.3g} after Adam to "
                        f"{float(latents['sigma']):.3g}: the network interpolates its training data and the "
                        f"objective grows without bound as the noise goes to 0; {COLLAPSE_FIX}.")
        warnings.warn(
            f"the MAP polish ({polish}) stopped after {fit.iterations} iterations {decrement:.3g} posterior standard "
            f"deviations from the mode (Newton decrement > map_tolerance={tolerance:g}; gradient norm "
            f"{gradient.norm().item():.3g}{_rising(fit.last_rise)}): the MAP estimate (the Laplace approximation's "
            f"centre, or a guide's start) is off the mode; {map_advice(at_kink, stalled)}.{collapse}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return MapEstimate(theta, latents, likelihood_term.item(), prior_term.item(), gradient.norm().item(), decrement,
                       polish, fit.iterations, converged, prior.weight,
                       None if choice is None else choice.evaluations, None if choice is None else choice.bracketed,
                       at_kink, stalled, fit.last_rise)


def _minibatch_estimate(model, x, y, run: MinibatchFit, prior: ScaledPrior, latents: dict, judged_from: int,
                        rows: int) -> MapEstimate:
    """The :class:`MapEstimate` of a minibatch fit: the log joint and its gradient over all rows, in one epoch of
    batches of ``rows`` (:func:`~bnn.inference.map_search.gradient_noise.full_gradient`), no Newton decrement (no
    curvature is formed), converged where the objective had flattened and the full gradient is within the batches'
    noise (:mod:`bnn.inference.map_search.minibatch_map`); a ``RuntimeWarning`` where not."""
    end = full_gradient(model, x, y, run.theta, latents, prior, rows, judged_from)
    if not torch.isfinite(end.gradient).all():
        raise FloatingPointError("the MAP fit ended at non-finite values; lower map_batch_lr or raise map_epochs")
    polish = f"{MINIBATCH_POLISH}, {run.epochs} epochs of {rows} rows"
    settled = end.noise_ratio <= NOISE_RATIO
    converged = run.flat and settled
    if not converged:
        trend = run.trend
        said = [] if run.flat else [
            "too few steps to judge whether its objective flattened" if trend is None else
            f"its objective rose by {trend.gain:.3g} per example over its last {trend.later_steps} steps (the last "
            f"tenth of its learning rate), more than {FLAT_SHARE:.0%} of its rise over the run"]
        said += [] if settled else [f"its full gradient is {end.noise_ratio:.2g} of one batch's gradient noise, more than "
                                    f"{NOISE_RATIO:g} (far from a mode)"]
        warnings.warn(f"the MAP fit on minibatches stopped before it settled: {'; '.join(said)}; the MAP estimate "
                      f"(the Laplace approximation's centre, or a guide's start) is short of the mode; {MINIBATCH_FIX}",
                      RuntimeWarning, stacklevel=user_stacklevel())
    log_prior_value = log_prior(model, run.theta, prior.distributions).item()
    return MapEstimate(run.theta, latents, end.log_likelihood, log_prior_value, end.gradient.norm().item(), math.nan,
                       polish, 0, converged, prior.weight, stalled=not converged, minibatch=True,
                       noise_ratio=end.noise_ratio)


def _rising(last_rise: float | None) -> str:
    """The last L-BFGS window's rise of the log joint, for the warning (nothing when there was none)."""
    if last_rise is None:
        return ""
    return f"; the last window of L-BFGS (up to {LBFGS_CHECK_EVERY} iterations) raised the log joint by {last_rise:.3g} nats"


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
                tolerance: float = MAP_TOLERANCE, max_iter: int | None = None) -> dict[str, torch.Tensor]:
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
    model : BayesianNetwork
        The model whose latent sites are estimated.
    x, y : torch.Tensor
        The training data, all of it (the MAP of a minibatch is another point).
    steps, lr, tolerance
        Adam's steps and rate, and the largest Newton decrement (posterior standard deviations) the polish accepts.
    max_iter : int, optional
        The polish's iterations at most (``None``: the polish's own, as :func:`find_map`).

    Returns
    -------
    dict of str to torch.Tensor
        Site name to value, shaped like the site, in the dtype of ``x``. Draws from torch's global
        random state (call it under :func:`bnn.runtime.seeding.seeded`).
    """
    x_work, y_work = working_data(x, y)
    estimate = find_map(model, x_work, y_work, steps=steps, lr=lr, tolerance=tolerance, progress=False,
                        max_iter=max_iter)
    values = {**split_flat(model.sites, estimate.theta), **estimate.latents}
    return {name: value.to(x.dtype) for name, value in values.items()}
