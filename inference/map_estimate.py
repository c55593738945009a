r"""The maximum a posteriori weights :math:`\theta_{MAP}`, the centre of a Laplace approximation.

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta, \sigma) + \log p(\theta)

over the flat weight vector (:mod:`bnn.guides.flat_weights`), starting from a draw of the
prior: Adam on the per-datum objective, then an L-BFGS polish (strong Wolfe line search)
until no entry of the log joint's gradient exceeds ``tolerance`` (then the mean is off the
mode by at most :math:`\lVert\nabla\rVert / \sqrt{\lambda_{min}(\Lambda)}` posterior
standard deviations, to second order). A Gaussian likelihood with
learned noise has :math:`\log\sigma` optimised jointly with the weights but *without* its
prior, so at the joint optimum :math:`\theta_{MAP}` maximises the log joint at
:math:`\sigma` and :math:`\sigma` is the maximum-likelihood noise at :math:`\theta_{MAP}`;
it is finally set to its closed form there,
:math:`\hat\sigma^2 = \frac{1}{nK}\sum_{i,k} (y_{ik} - f_{ik})^2`, and held fixed afterwards
(fitting it by the marginal likelihood after training is fragile, laplace-torch issue 142).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pyro
import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference.progress import progress_bar
from bnn.inference.record import FitRecord

from bnn.stacklevel import user_stacklevel

LBFGS_MAX_ITERATIONS = 1000
LBFGS_HISTORY = 100
LBFGS_TOLERANCE_CHANGE = 1e-14
MAP_STEPS, MAP_LR, MAP_TOLERANCE = 1000, 0.01, 1e-2
"""The Adam steps, Adam's rate and the L-BFGS gradient tolerance of :func:`map_weights`."""


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
    lbfgs_iterations : int
        Iterations the L-BFGS polish took.
    converged : bool
        Whether no entry of the gradient exceeds the tolerance (else a ``RuntimeWarning`` was issued).
    """

    theta: torch.Tensor
    latents: dict[str, torch.Tensor]
    log_likelihood: float
    log_prior: float
    grad_norm: float
    lbfgs_iterations: int
    converged: bool


@dataclass(kw_only=True)
class MapFitRecord(FitRecord):
    """What every fit centred on one MAP estimate records about it (the MAP method, Laplace).

    Attributes
    ----------
    map_steps, map_lbfgs_iterations : int
        Adam steps and L-BFGS iterations of the MAP fit.
    map_grad_norm : float
        The norm of the log joint's gradient at the MAP (see :attr:`MapEstimate.grad_norm`).
    map_converged : bool
        Whether no entry of that gradient exceeds the tolerance.
    noise : float, optional
        The maximum-likelihood noise scale of a learned Gaussian noise.
    """

    map_steps: int
    map_lbfgs_iterations: int
    map_grad_norm: float
    map_converged: bool
    noise: float | None = None

    @property
    def converged(self) -> bool:
        """Whether the MAP converged."""
        return self.map_converged

    def problems(self) -> list[str]:
        if self.map_converged:
            return []
        return [f"the MAP did not converge (gradient norm {self.map_grad_norm:.3g} after {self.map_steps} Adam "
                f"steps and {self.map_lbfgs_iterations} L-BFGS iterations): raise map_steps or map_lr, or loosen "
                "map_tolerance"]


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
    judged_from: int = 0,
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
        Adam's steps and rate before the L-BFGS polish.
    tolerance : float
        The largest entry of :math:`\nabla_\theta \log p(y, \theta \mid x)` accepted as converged.
    progress : bool
        Show tqdm bars.
    judged_from : int
        With ``judged_from > 0`` (a Laplace approximation over the entries from there on, the
        rest held fixed) a second polish optimises those entries alone, and convergence is judged,
        and the gradient norm reported, on them only: the fixed entries may sit at a kink of their
        prior (zero under a Laplace prior) where no gradient vanishes and L-BFGS stalls.

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
        return _find_map(model, x, y, steps, lr, tolerance, progress, judged_from)


def _find_map(model, x, y, steps: int, lr: float, tolerance: float, progress: bool, judged_from: int) -> MapEstimate:
    n = x.shape[0]
    distributions = prior_distributions(model)
    start = join_sites(model.sites, {name: d.sample() for name, d in distributions.items()}).to(x.dtype)
    theta = start.clone().requires_grad_(True)
    log_noise = {name: value.log().requires_grad_(True) for name, value in _ml_noise(model, x, y, start).items()}

    def objective(weights: torch.Tensor) -> torch.Tensor:
        latents = {name: value.exp() for name, value in log_noise.items()}
        return -(log_likelihood(model, x, y, weights, latents) + log_prior(model, weights, distributions)) / n

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

    evaluations = progress_bar(desc="MAP (L-BFGS)", unit="eval", enabled=progress, leave=False)

    def polish(block: torch.Tensor, assemble) -> int:
        lbfgs = torch.optim.LBFGS(
            [block, *log_noise.values()], lr=1.0, max_iter=LBFGS_MAX_ITERATIONS, tolerance_grad=tolerance / n,
            tolerance_change=LBFGS_TOLERANCE_CHANGE, history_size=LBFGS_HISTORY, line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            lbfgs.zero_grad()
            loss = objective(assemble())
            loss.backward()
            evaluations.update()
            return loss

        lbfgs.step(closure)
        return int(lbfgs.state_dict()["state"][0]["n_iter"])

    iterations = polish(theta, lambda: theta)
    theta = theta.detach()
    if judged_from:
        fixed, covered = theta[:judged_from], theta[judged_from:].clone().requires_grad_(True)
        iterations += polish(covered, lambda: torch.cat([fixed, covered]))
        theta = torch.cat([fixed, covered.detach()])
    evaluations.close()
    return _estimate(model, x, y, theta, distributions, tolerance, judged_from, iterations)


def _estimate(model, x, y, theta, distributions, tolerance: float, judged_from: int, iterations: int) -> MapEstimate:
    """The :class:`MapEstimate` at ``theta`` with the noise at its closed form; warn when not converged."""
    latents = _ml_noise(model, x, y, theta)
    point = theta.clone().requires_grad_(True)
    with torch.enable_grad():
        likelihood_term = log_likelihood(model, x, y, point, latents)
        prior_term = log_prior(model, point, distributions)
        (gradient,) = torch.autograd.grad(likelihood_term + prior_term, point)
    gradient = gradient[judged_from:]
    if not torch.isfinite(gradient).all():
        raise FloatingPointError("the MAP fit ended at non-finite values; lower map_lr or raise map_steps")
    largest = gradient.abs().max().item()
    if largest > tolerance:
        warnings.warn(
            f"the MAP polish stopped after {iterations} L-BFGS iterations with a gradient entry of {largest:.3g} > "
            f"map_tolerance={tolerance:g} (norm {gradient.norm().item():.3g}): the MAP estimate (the Laplace "
            "approximation's centre, or a guide's start) is off the mode; raise map_steps or map_lr, or loosen map_tolerance",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    return MapEstimate(
        theta, latents, likelihood_term.item(), prior_term.item(), gradient.norm().item(), iterations, largest <= tolerance
    )


def map_weights(model, x: torch.Tensor, y: torch.Tensor, *, steps: int = MAP_STEPS, lr: float = MAP_LR,
                tolerance: float = MAP_TOLERANCE) -> dict[str, torch.Tensor]:
    r"""The MAP value of every latent site of ``model`` on ``(x, y)``, a starting point for a guide.

    .. math::

        \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

    by :func:`find_map` (Adam for ``steps`` steps at rate ``lr`` from a prior draw, then L-BFGS
    until no gradient entry exceeds ``tolerance``; a ``RuntimeWarning`` when it stops short), in
    float64 as the Laplace fit (float32 stalls L-BFGS above the tolerance), split into the weight
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
        Adam's steps and rate, and the largest gradient entry the L-BFGS polish accepts.

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
