r"""The maximum a posteriori weights :math:`\theta_{MAP}`, the centre of a Laplace approximation.

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta, \sigma) + \log p(\theta)

over the flat weight vector (:mod:`bnn.guides.flat_weights`), starting from a draw of the
prior: Adam on the per-datum objective, then a polish until the Newton decrement
:math:`\delta = \sqrt{g^\top \Lambda^{-1} g}` (:mod:`bnn.inference.gauss_newton`; :math:`g` the log joint's
gradient, :math:`\Lambda` its Gauss-Newton precision) is at most ``tolerance``: the mode then lies, to second
order, within ``tolerance`` posterior standard deviations. The polish is Levenberg-Marquardt on the
Gauss-Newton precision where the likelihood has a GGN and a step is affordable
(:func:`~bnn.inference.gauss_newton.uses_gauss_newton`), else L-BFGS (strong Wolfe
line search; :math:`\delta` then from the diagonal of :math:`\Lambda`). A Gaussian likelihood with
learned noise has :math:`\log\sigma` optimised jointly with the weights by Adam (and L-BFGS) but *without*
its prior, and held at its closed form after each Levenberg-Marquardt step, so at the optimum
:math:`\theta_{MAP}` maximises the log joint at :math:`\sigma` and :math:`\sigma` is the maximum-likelihood
noise at :math:`\theta_{MAP}`, :math:`\hat\sigma^2 = \frac{1}{nK}\sum_{i,k} (y_{ik} - f_{ik})^2`, held fixed
afterwards (fitting it by the marginal likelihood after training is fragile, laplace-torch issue 142).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pyro
import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference.gauss_newton import (
    elementwise_curvature,
    levenberg_marquardt,
    log_joint_precision,
    newton_decrement,
    uses_gauss_newton,
)
from bnn.inference.progress import progress_bar
from bnn.inference.record import FitRecord

from bnn.stacklevel import user_stacklevel

LBFGS_HISTORY = 100
LBFGS_CHECK_EVERY = 50
"""L-BFGS iterations between two checks of the Newton decrement."""
LBFGS_TOLERANCE_CHANGE = 1e-14
RAISE_BUDGET = "raise map_max_iter or map_steps (or map_lr), or loosen map_tolerance"
MAP_STEPS, MAP_LR, MAP_TOLERANCE, MAP_MAX_ITER = 1000, 0.01, 0.1, 1000
"""The defaults of every MAP fit: Adam's steps and rate, the largest Newton decrement accepted (posterior standard
deviations) and the polish's iterations at most."""


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
        The maximum-likelihood noise scale of a learned Gaussian noise.
    """

    map_steps: int
    map_lbfgs_iterations: int
    map_grad_norm: float
    map_converged: bool
    map_newton_decrement: float | None = None
    map_polish: str | None = None
    noise: float | None = None

    @property
    def converged(self) -> bool:
        """Whether the MAP converged."""
        return self.map_converged

    def problems(self) -> list[str]:
        if self.map_converged:
            return []
        off = "" if self.map_newton_decrement is None else f"{self.map_newton_decrement:.3g} posterior sd from the mode, "
        return [f"the MAP did not converge (gradient norm {self.map_grad_norm:.3g}, {off}after {self.map_steps} Adam "
                f"steps and {self.map_lbfgs_iterations} {self.map_polish or 'polish'} iterations): {RAISE_BUDGET}"]


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


def _ml_noise(model, x, y, theta: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"sigma": maximum-likelihood noise}`` for a learned Gaussian noise, else ``{}``."""
    if not model.likelihood.latent_priors():
        return {}
    with torch.no_grad():
        f = model.forward(x, split_flat(model.sites, theta))
        return {"sigma": (f - y.reshape(f.shape)).pow(2).mean().sqrt()}


def find_map(
    model, x: torch.Tensor, y: torch.Tensor, *, steps: int, lr: float, tolerance: float, progress: bool,
    max_iter: int = MAP_MAX_ITER, judged_from: int = 0, init: torch.Tensor | None = None,
    noise: torch.Tensor | None = None, prior_weight: float = 1.0, polish: bool = True,
) -> MapEstimate:
    r"""Maximise the log joint over the flat weights (and a learned noise); see the module docstring.

    .. math::

        \theta_{MAP} = \arg\min_\theta \; -\frac{1}{n}\big[\log p(y \mid x, \theta, \sigma) + \log p(\theta)\big]

    Distribution argument checks are off inside: the data were validated at the edge, and
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
        Iterations of the polish at most.
    judged_from : int
        With ``judged_from > 0`` (a Laplace approximation over the entries from there on, the
        rest held fixed) a second polish optimises those entries alone, and convergence is judged,
        and the gradient norm reported, on them only: the fixed entries may sit at a kink of their
        prior (zero under a Laplace prior) where no gradient vanishes and the polish stalls.
    init : torch.Tensor, optional
        Start here instead of at a draw of the prior (then ``steps=0`` skips Adam).
    noise : torch.Tensor, optional
        Hold a learned noise :math:`\sigma` at this value instead of fitting it.
    prior_weight : float
        :math:`\alpha` multiplying :math:`\log p(\theta_k)` for the entries from ``judged_from`` on: under a Gaussian
        prior, the MAP under the prior precision scaled by :math:`\alpha` (the Laplace evidence's tuning).
    polish : bool
        ``False`` stops after Adam, unjudged (a start for fits that polish under other settings).

    Returns
    -------
    MapEstimate
        :math:`\theta_{MAP}` and the terms of the log joint there (a ``RuntimeWarning`` when not converged).
        The initial draw comes from the global random state (call it under
        :func:`bnn.inference.seeding.seeded`).

    Raises
    ------
    FloatingPointError
        When the objective or the final gradient is not finite.
    """
    with pyro.validation_enabled(False):
        return _find_map(model, x, y, steps, lr, tolerance, progress, max_iter if polish else 0, judged_from, init, noise,
                         prior_weight)


class _Prior:
    r""":math:`\sum_k c_k \log p(\theta_k)` with :math:`c_k` = ``weight`` from entry ``weighted_from`` on, else 1."""

    def __init__(self, model, weighted_from: int, weight: float) -> None:
        self.model, self.distributions = model, prior_distributions(model)
        self.site_weights, offset = {}, 0
        for site in model.sites:
            self.site_weights[site.name] = weight if offset >= weighted_from else 1.0
            offset += site.numel

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        values = split_flat(self.model.sites, theta)
        return sum(self.site_weights[s.name] * self.distributions[s.name].log_prob(values[s.name]).sum()
                   for s in self.model.sites)

    def curvature(self, theta: torch.Tensor, start: int) -> torch.Tensor:
        r""":math:`-c_k\,\partial^2 \log p(\theta_k) / \partial\theta_k^2` for the entries from ``start`` on."""
        values = split_flat(self.model.sites, theta)
        pieces = [self.site_weights[s.name] * elementwise_curvature(self.distributions[s.name], values[s.name]).reshape(-1)
                  for s in self.model.sites]
        return torch.cat(pieces)[start:]


def _precision(model, x, theta, latents, prior: _Prior, start: int, diagonal: bool) -> torch.Tensor:
    """The Gauss-Newton precision of the log joint over the entries from ``start`` on."""
    return log_joint_precision(model, x, theta, latents, prior.curvature(theta, start), start=start, diagonal=diagonal)


def _find_map(model, x, y, steps: int, lr: float, tolerance: float, progress: bool, max_iter: int,
              judged_from: int, init: torch.Tensor | None, noise: torch.Tensor | None, prior_weight: float) -> MapEstimate:
    n = x.shape[0]
    prior = _Prior(model, judged_from, prior_weight)
    distributions = prior.distributions
    if init is None:
        init = join_sites(model.sites, {name: d.sample() for name, d in distributions.items()})
    start = init.detach().to(x.dtype)
    theta = start.clone().requires_grad_(True)
    fitted_noise = _ml_noise(model, x, y, start) if noise is None else {}
    log_noise = {name: value.log().requires_grad_(True) for name, value in fitted_noise.items()}

    def latents_at(weights: torch.Tensor) -> dict[str, torch.Tensor]:
        return _ml_noise(model, x, y, weights) if noise is None else {"sigma": torch.as_tensor(noise, dtype=x.dtype)}

    def objective(weights: torch.Tensor) -> torch.Tensor:
        latents = {name: value.exp() for name, value in log_noise.items()} or latents_at(weights)
        return -(log_likelihood(model, x, y, weights, latents) + prior.log_prob(weights)) / n

    adam = torch.optim.Adam([theta, *log_noise.values()], lr=lr)
    bar = progress_bar(range(steps), desc="MAP (Adam)", enabled=progress, leave=False)
    for step in bar:
        adam.zero_grad()
        loss = objective(theta)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"the MAP objective became {loss.item()} at Adam step {step}; lower map_lr (now {lr})")
        loss.backward()
        adam.step()
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4g}")
    bar.close()
    theta = theta.detach()

    gauss_newton = uses_gauss_newton(model, n, theta.shape[0] - judged_from)
    polish_name = "levenberg-marquardt" if gauss_newton else "lbfgs"
    iterations_bar = progress_bar(desc=f"MAP ({polish_name})", unit="it", enabled=progress, leave=False)

    def joint(weights: torch.Tensor, latents: dict) -> torch.Tensor:
        return log_likelihood(model, x, y, weights, latents) + prior.log_prob(weights)

    def decrement(weights: torch.Tensor, begin: int) -> float:
        latents = latents_at(weights)
        point = weights.clone().requires_grad_(True)
        with torch.enable_grad():
            (gradient,) = torch.autograd.grad(joint(point, latents), point)
        return newton_decrement(gradient[begin:], _precision(model, x, weights, latents, prior, begin, True))

    def lbfgs(weights: torch.Tensor, begin: int) -> tuple[torch.Tensor, int]:
        fixed, block = weights[:begin], weights[begin:].clone().requires_grad_(True)
        optimiser = torch.optim.LBFGS(
            [block, *log_noise.values()], lr=1.0, max_iter=LBFGS_CHECK_EVERY, tolerance_grad=0.0,
            tolerance_change=LBFGS_TOLERANCE_CHANGE, history_size=LBFGS_HISTORY, line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            optimiser.zero_grad()
            loss = objective(torch.cat([fixed, block]))
            loss.backward()
            return loss

        done = 0
        while done < max_iter:
            optimiser.step(closure)
            taken = int(optimiser.state_dict()["state"][0]["n_iter"]) - done
            done += taken
            iterations_bar.update(taken)
            if taken < LBFGS_CHECK_EVERY or decrement(torch.cat([fixed, block.detach()]), begin) <= tolerance:
                break
        return torch.cat([fixed, block.detach()]), done

    def polish(weights: torch.Tensor, begin: int) -> tuple[torch.Tensor, int]:
        if not gauss_newton:
            return lbfgs(weights, begin)
        return levenberg_marquardt(
            joint, latents_at, lambda w, latents: _precision(model, x, w, latents, prior, begin, False), weights,
            start=begin, tolerance=tolerance, max_iterations=max_iter, progress_bar=iterations_bar)

    if not max_iter:
        iterations_bar.close()
        return _estimate(model, x, y, theta, prior, latents_at(theta), tolerance, judged_from, 0, polish_name, warn=False)
    theta, iterations = polish(theta, 0)
    if judged_from:
        theta, more = polish(theta, judged_from)
        iterations += more
    iterations_bar.close()
    return _estimate(model, x, y, theta, prior, latents_at(theta), tolerance, judged_from, iterations, polish_name)


def _estimate(model, x, y, theta, prior: _Prior, latents: dict, tolerance: float, judged_from: int, iterations: int,
              polish: str, *, warn: bool = True) -> MapEstimate:
    """The :class:`MapEstimate` at ``theta`` with the noise at ``latents``; warn when not converged."""
    point = theta.clone().requires_grad_(True)
    with torch.enable_grad():
        likelihood_term = log_likelihood(model, x, y, point, latents)
        prior_term = log_prior(model, point, prior.distributions)
        (gradient,) = torch.autograd.grad(likelihood_term + prior.log_prob(point), point)
    gradient = gradient[judged_from:]
    if not torch.isfinite(gradient).all():
        raise FloatingPointError("the MAP fit ended at non-finite values; lower map_lr or raise map_steps")
    dense = polish == "levenberg-marquardt"
    decrement = newton_decrement(gradient, _precision(model, x, theta, latents, prior, judged_from, not dense))
    if warn and not decrement <= tolerance:
        warnings.warn(
            f"the MAP polish ({polish}) stopped after {iterations} iterations {decrement:.3g} posterior standard "
            f"deviations from the mode (Newton decrement > map_tolerance={tolerance:g}; gradient norm "
            f"{gradient.norm().item():.3g}): the MAP estimate (the Laplace approximation's centre, or a guide's start) "
            f"is off the mode; {RAISE_BUDGET}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return MapEstimate(theta, latents, likelihood_term.item(), prior_term.item(), gradient.norm().item(), decrement,
                       polish, iterations, decrement <= tolerance)


def map_weights(model, x: torch.Tensor, y: torch.Tensor, *, steps: int = MAP_STEPS, lr: float = MAP_LR,
                tolerance: float = MAP_TOLERANCE) -> dict[str, torch.Tensor]:
    r"""The MAP value of every latent site of ``model`` on ``(x, y)``, a starting point for a guide.

    .. math::

        \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

    by :func:`find_map` (Adam for ``steps`` steps at rate ``lr`` from a prior draw, then a polish
    until the Newton decrement is at most ``tolerance``; a ``RuntimeWarning`` when it stops short), in
    float64 as the Laplace fit (float32 stalls the polish above the tolerance), split into the weight
    sites, plus a learned noise ``sigma`` at its maximum-likelihood value
    :math:`\hat\sigma^2 = \frac{1}{nK}\sum_{i,k} (y_{ik} - f_{ik})^2`. SVI passes the result as a
    guide's ``init_loc`` when the guide options say ``init_loc="map"``.

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
