r"""The stages of one MAP search: Adam from a start, then a polish (Levenberg-Marquardt on the Gauss-Newton
precision, or L-BFGS) until the Newton decrement is at most the tolerance or the log joint stops rising
(:mod:`bnn.inference.map_search.map_estimate`). Where Levenberg-Marquardt stops short, L-BFGS goes on for the rest
of the budget; where L-BFGS ends itself (its line search failed, as at a kink), it starts afresh from there.

**Whitened L-BFGS.** Where the dense precision is unaffordable and every layer and prior allow the Kronecker factors
(:mod:`bnn.inference.curvature.kron_curvature`), L-BFGS works in whitened coordinates: each window of
:data:`LBFGS_CHECK_EVERY` iterations starts afresh at :math:`\theta_0` and moves

.. math::

    \theta = \theta_0 + S u, \qquad S S^\top = M^{-1},

with :math:`M` the Kronecker-factored precision at :math:`\theta_0`, so that the log joint's curvature in :math:`u`
is about the identity and L-BFGS's unit first step and short memory suit it (the preconditioning of Nocedal and
Wright 2006, ch. 7, by a change of variables). It reaches the tolerance in several times fewer iterations than plain
L-BFGS on the built-in MNIST-1D MLP (``benchmarks/results/cnn.md``).
"""

from __future__ import annotations

import math

import torch
from bnn.guides.kron_covariance import KronCovariance
from bnn.inference.curvature.cg_decrement import PrecisionOperator, cg_decrement
from bnn.inference.curvature.gauss_newton import (
    levenberg_marquardt,
    log_joint_precision,
    newton_decrement,
    uses_gauss_newton,
)
from bnn.inference.curvature.kron_curvature import kron_posterior, kron_supported
from bnn.inference.curvature.output_curvature import OUTPUT_HESSIANS
from bnn.inference.map_search.advice import nonfinite_objective
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood

from bnn.runtime.progress import progress_bar

LBFGS_HISTORY = 100
LBFGS_CHECK_EVERY = 50
"""L-BFGS iterations between two checks of the Newton decrement."""
LBFGS_TOLERANCE_CHANGE = 1e-14
LEVENBERG_MARQUARDT_MAX_ITER, LBFGS_MAX_ITER, KINKED_LBFGS_MAX_ITER = 1000, 10000, 1000
"""A polish's iterations at most when the fit sets none: Levenberg-Marquardt steps (a dense Gauss-Newton solve each;
where it stops short L-BFGS takes the rest), or L-BFGS iterations where the polish is L-BFGS from the start (a
gradient and a little more each; thousands where the dense precision is unaffordable, about twice the most a
built-in data set's fit needs), fewer for a network with kinks (:meth:`~bnn.models.network.BayesianNetwork.has_kinks`),
whose polish stops at a kink whatever its budget (chosen on the built-in data: ``benchmarks/results/cnn.md``)."""


class MapProblem:
    """The data, the model and the settings of one :func:`find_map` call, and the pieces its stages share."""

    def __init__(self, model, x, y, judged_from: int, max_iter: int | None) -> None:
        self.model, self.x, self.y, self.judged_from, self.max_iter = model, x, y, judged_from, max_iter
        self.iterations, self.bar = 0, None  # the polish's progress bar, made once Adam is done
        self.budget = 0  # the last polish's iterations at most (polish_budget)
        self.stopped_early = False  # whether the last polish stopped before its budget
        self.handed_over = False  # whether Levenberg-Marquardt stopped short in the last polish and L-BFGS went on
        self.whitened = False  # whether the last polish's L-BFGS worked in whitened coordinates
        self.last_rise: float | None = None  # the log joint's rise over the last polish's last L-BFGS window
        self._kron: tuple | None = None  # the last Kronecker-factored covariance, and the point it was made at

    def stopped_rising(self, tolerance: float) -> bool:
        r"""Whether the last L-BFGS window raised the log joint by at most :math:`\text{tolerance}^2/2` nats
        (:mod:`bnn.inference.map_search.map_estimate`)."""
        return self.last_rise is not None and self.last_rise <= tolerance**2 / 2

    def latents(self, noise: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The likelihood's latents with the noise held at ``noise`` (``{}`` without a learned noise)."""
        return {} if noise is None else {"sigma": torch.as_tensor(noise, dtype=self.x.dtype)}

    def precision(self, theta, latents, prior: ScaledPrior, start: int) -> torch.Tensor:
        """The dense Gauss-Newton precision of the log joint over the entries from ``start`` on."""
        return log_joint_precision(self.model, self.x, theta, latents, prior.curvature(theta, start), start=start,
                                   diagonal=False)

    def decrement(self, theta, latents, prior: ScaledPrior, start: int, gradient: torch.Tensor, tolerance: float, *,
                  verdict_only: bool = False) -> float:
        r"""The Newton decrement :math:`\delta` of ``gradient`` over the entries from ``start`` on: from the dense
        precision where a Gauss-Newton step is affordable, else by conjugate gradients on the matrix-free one
        (:mod:`bnn.inference.curvature.cg_decrement`; ``verdict_only``: stopped once it is certain to exceed
        ``tolerance``); for a likelihood without a GGN from the prior's curvature alone (an upper bound where the
        likelihood's own curvature is positive semi-definite)."""
        model, x = self.model, self.x
        if uses_gauss_newton(model, x.shape[0], gradient.shape[0]):
            return newton_decrement(gradient, self.precision(theta, latents, prior, start))
        curvature = prior.curvature(theta, start)
        if type(model.likelihood) in OUTPUT_HESSIANS:
            covariance = self.kron_covariance(theta, latents, prior) if self.whitened and start == 0 else None
            operator = PrecisionOperator(model, x, theta, latents, curvature, start=start, covariance=covariance)
            return cg_decrement(operator, gradient, tolerance, verdict_only=verdict_only)
        return newton_decrement(gradient, log_joint_precision(model, x, theta, latents, curvature, start=start,
                                                              diagonal=True))

    def kron_covariance(self, theta, latents, prior: ScaledPrior) -> KronCovariance:
        """The Kronecker-factored posterior covariance at ``theta`` (all entries covered), the last one again when asked
        at the same weights, latents and prior multiplier: a whitened polish's convergence check after each L-BFGS
        window and its re-centring there ask at the same point."""
        point = (theta.detach(), {name: float(value) for name, value in latents.items()}, prior.weight)
        last = self._kron
        if last is None or last[1:3] != point[1:] or not torch.equal(last[0], point[0]):
            self._kron = last = (*point, kron_posterior(self.model, self.x, theta, latents, prior.curvature(theta, 0)))
        return last[3]

    def polish(self, theta, prior: ScaledPrior, latents_at, log_noise: dict, tolerance: float) -> torch.Tensor:
        """Polish all entries, then those from ``judged_from`` on (if any), until the decrement is at most
        ``tolerance``; ``latents_at(theta)`` gives the noise (held, or at its maximum-likelihood value),
        ``log_noise`` a learned noise L-BFGS fits with the weights (``{}`` when held)."""
        for begin in (0, self.judged_from) if self.judged_from else (0,):
            theta, taken = self._polish_from(theta, begin, prior, latents_at, log_noise, tolerance)
            self.iterations += taken
            self.stopped_early = taken < self.budget
        return theta

    def _polish_from(self, theta, begin, prior: ScaledPrior, latents_at, log_noise, tolerance) -> tuple[torch.Tensor, int]:
        model, x, y = self.model, self.x, self.y
        dense = uses_gauss_newton(model, x.shape[0], theta.shape[0] - begin)  # a step's precision covers these
        budget = self.budget = polish_budget(self.max_iter, dense, model.has_kinks())

        def joint(weights: torch.Tensor, latents: dict) -> torch.Tensor:
            return log_likelihood(model, x, y, weights, latents) + prior.log_prob(weights)

        def decrement(weights: torch.Tensor) -> float:
            latents = latents_at(weights)
            point = weights.clone().requires_grad_(True)
            with torch.enable_grad():
                (gradient,) = torch.autograd.grad(joint(point, latents), point)
            return self.decrement(weights, latents, prior, begin, gradient[begin:], tolerance, verdict_only=True)

        self.handed_over, self.whitened, self.last_rise, taken = False, False, None, 0
        if dense:
            theta, taken = levenberg_marquardt(
                joint, latents_at, lambda w, latents: self.precision(w, latents, prior, begin), theta, start=begin,
                tolerance=tolerance, max_iterations=budget, progress_bar=self.bar)
            if taken >= budget or decrement(theta) <= tolerance:
                return theta, taken
            self.handed_over = True  # Levenberg-Marquardt stopped short: L-BFGS takes the rest of the budget
        fixed, block = theta[:begin], theta[begin:].clone().requires_grad_(True)
        whitened = self.whitened = not dense and self.whitens(begin)
        centre, covariance = None, None  # whitened: the covered entries are centre + S block, S S^T = covariance

        def covered() -> torch.Tensor:
            return block if covariance is None else centre + covariance.times(block)

        def latents_of(weights: torch.Tensor) -> dict:
            return {name: value.exp() for name, value in log_noise.items()} or latents_at(weights)

        def lbfgs() -> torch.optim.LBFGS:
            nonlocal centre, covariance
            if whitened:  # re-centre at the current weights, whitened by the Kronecker-factored covariance there
                centre = covered().detach().clone()  # block is zeroed below
                weights = torch.cat([fixed, centre])
                latents = {name: value.detach() for name, value in latents_of(weights).items()}
                covariance = self.kron_covariance(weights, latents, prior)
                with torch.no_grad():
                    block.zero_()
            return torch.optim.LBFGS(
                [block, *log_noise.values()], lr=1.0, max_iter=LBFGS_CHECK_EVERY, tolerance_grad=0.0,
                tolerance_change=LBFGS_TOLERANCE_CHANGE, history_size=LBFGS_HISTORY, line_search_fn="strong_wolfe",
            )

        def objective() -> torch.Tensor:
            weights = torch.cat([fixed, covered()])
            return -joint(weights, latents_of(weights)) / x.shape[0]

        def closure() -> torch.Tensor:
            optimiser.zero_grad()
            loss = objective()
            loss.backward()
            return loss

        optimiser, done = lbfgs(), 0
        while taken + done < budget:
            window = min(LBFGS_CHECK_EVERY, budget - taken - done)
            optimiser.param_groups[0]["max_iter"] = window
            counted = lbfgs_iterations(optimiser)
            before = float(optimiser.step(closure).detach())
            moved = lbfgs_iterations(optimiser) - counted
            done += moved
            self.bar.update(moved)
            if window == LBFGS_CHECK_EVERY:  # a window the budget cut short is not judged
                with torch.no_grad():
                    self.last_rise = (before - float(objective())) * x.shape[0]
            if moved == 0 or self.stopped_rising(tolerance):
                break  # the log joint stopped rising
            if decrement(torch.cat([fixed, covered().detach()])) <= tolerance:
                break
            if moved < window or whitened:  # L-BFGS ended itself (a line search that failed at a kink), or re-centre
                optimiser = lbfgs()
        return torch.cat([fixed, covered().detach()]), taken + done

    def whitens(self, start: int) -> bool:
        """Whether L-BFGS works in whitened coordinates: all entries covered, a likelihood with a GGN, and every layer
        and prior allowing the Kronecker factors."""
        return start == 0 and type(self.model.likelihood) in OUTPUT_HESSIANS and kron_supported(self.model, self.x)


def polish_budget(max_iter: int | None, dense: bool, kinked: bool) -> int:
    """A polish's iterations at most: ``max_iter``, or where it is ``None`` :data:`LEVENBERG_MARQUARDT_MAX_ITER` for a
    ``dense`` polish (Levenberg-Marquardt) and for L-BFGS :data:`LBFGS_MAX_ITER`, or :data:`KINKED_LBFGS_MAX_ITER`
    where the network has ``kinked`` activations or pooling."""
    if max_iter is not None:
        return max_iter
    if dense:
        return LEVENBERG_MARQUARDT_MAX_ITER
    return KINKED_LBFGS_MAX_ITER if kinked else LBFGS_MAX_ITER


def lbfgs_iterations(optimiser: torch.optim.LBFGS) -> int:
    """The iterations ``optimiser`` has taken."""
    return int(optimiser.state_dict()["state"].get(0, {}).get("n_iter", 0))


def adam_steps(fit: MapProblem, theta: torch.Tensor, prior: ScaledPrior, latents: dict, log_noise: dict, steps: int, lr: float,
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
            raise FloatingPointError(nonfinite_objective(model, x, theta.detach(), loss.item(), step, lr))
        loss.backward()
        adam.step()
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4g}")
    bar.close()
    return theta.detach()
