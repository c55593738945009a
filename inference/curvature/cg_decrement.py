r"""The Newton decrement of a network too large for a dense precision, by conjugate gradients on the matrix-free
Gauss-Newton precision.

The precision :math:`\Lambda = G + \operatorname{diag}(P)` of :mod:`bnn.inference.curvature.gauss_newton` is
not formed; its product with a vector is

.. math::

    \Lambda v = J^\top \big(H\, (J v)\big) + P \odot v ,

one forward-mode pass for :math:`Jv`, the output Hessians :math:`H_i`, and one reverse-mode pass for
:math:`J^\top u` (Pearlmutter 1994; Schraudolph 2002), about three gradients' work. Preconditioned conjugate
gradients (Hestenes and Stiefel 1952) solve :math:`\Lambda s = g`, preconditioned by the Kronecker-factored
precision :math:`M` (:mod:`bnn.inference.curvature.kron_curvature`) where every layer and prior allow it,
else by :math:`\Lambda`'s diagonal. After :math:`k` iterations from :math:`s_0 = 0`, with residual
:math:`r_k = g - \Lambda s_k`,

.. math::

    \delta^2 = g^\top \Lambda^{-1} g = g^\top s_k + r_k^\top s_k + r_k^\top \Lambda^{-1} r_k

exactly (expand :math:`\Lambda^{-1} g = s_k + \Lambda^{-1} r_k`). The last term is estimated by
:math:`r_k^\top M^{-1} r_k`, and the iterations stop once that estimate is at most :data:`CG_RESIDUAL_SHARE`
squared of :math:`\max(\delta_k^2, \text{tolerance}^2)`, or, far from the mode, where
:math:`\delta_k^2 = g^\top s_k + r_k^\top s_k` already exceeds :data:`FAR` times the tolerance squared, once it is at
most :data:`FAR_SHARE` squared of :math:`\delta_k^2`. Since :math:`\delta_k^2 = 2 g^\top s_k - s_k^\top \Lambda s_k`
is the largest value of that quadratic on the Krylov space, :math:`\delta_k \le \delta` whatever :math:`k`, and it
grows with :math:`k`: the verdict is then certain, and :math:`\delta` is known to a few per cent, enough to say how
far the mode is, in far fewer products than iterating to convergence. Where only the verdict is asked
(``verdict_only``: a polish deciding whether to go on), the iterations stop as soon as :math:`\delta_k` exceeds the
tolerance. Where :math:`M` fits :math:`\Lambda` poorly that estimate falls short, so :math:`\delta` is read a little
low (against the dense precision's on the built-in MNIST-1D MLP: ``benchmarks/results/cnn.md``).

Neither of the cheaper estimates will do. The diagonal one, :math:`g^\top \operatorname{diag}(\Lambda)^{-1} g`,
ignores the correlations between weights; the Kronecker-factored one is :math:`g^\top M^{-1} g`. Both understate how
far the mode is, and so would pass a MAP still off it (as on the built-in MNIST-1D MLP:
``benchmarks/results/cnn.md``).
"""

from __future__ import annotations

import math

import torch
from bnn.guides.flat_weights import split_flat
from bnn.guides.kron_covariance import KronCovariance
from bnn.inference.curvature.gauss_newton import log_joint_precision
from bnn.inference.curvature.kron_curvature import kron_posterior, kron_supported
from bnn.inference.curvature.output_curvature import output_hessian
from torch.func import jvp, vjp

CG_MAX_ITER = 500
"""Conjugate-gradient iterations at most."""
CG_RESIDUAL_SHARE = 0.01
r"""The share of :math:`\max(\delta, \text{tolerance})` the unexplained term may hold (module notes)."""
FAR_SHARE, FAR = 0.1, 2.0
r"""Where :math:`\delta_k` exceeds :data:`FAR` times the tolerance, the share the unexplained term may hold (module
notes)."""


class PrecisionOperator:
    r""":math:`\Lambda` at ``theta`` over its entries from ``start`` on, as a product with a vector, and its
    preconditioner.

    Parameters
    ----------
    model : BayesianNetwork
        A model whose likelihood has a GGN (:mod:`bnn.inference.curvature.output_curvature`).
    x : torch.Tensor
        The training inputs.
    theta : torch.Tensor
        The flat weights ``(D,)``.
    latents : dict
        The likelihood's latents (``{}`` or ``{"sigma": ...}``).
    prior_curvature : torch.Tensor
        :math:`P` over the covered entries, clamped at 0 here.
    start : int
        The first covered entry; the rest are held fixed.
    covariance : KronCovariance, optional
        The Kronecker-factored posterior covariance at ``theta`` where the caller has it already (all entries
        covered), the preconditioner's factors.
    """

    def __init__(self, model, x: torch.Tensor, theta: torch.Tensor, latents: dict, prior_curvature: torch.Tensor, *,
                 start: int, covariance: KronCovariance | None = None) -> None:
        fixed, self.point = theta[:start].detach(), theta[start:].detach()
        self.prior = prior_curvature.clamp(min=0)

        def outputs(covered: torch.Tensor) -> torch.Tensor:
            return model.forward(x, split_flat(model.sites, torch.cat([fixed, covered])))

        self._outputs = outputs
        with torch.enable_grad():
            f, self._pullback = vjp(outputs, self.point)
        self._hessian = output_hessian(model.likelihood, f.detach(), latents)
        if covariance is None and start == 0 and kron_supported(model, x):
            covariance = kron_posterior(model, x, theta, latents, self.prior)
        if covariance is not None:
            self._inverse = lambda residual: covariance.times(covariance.transposed_times(residual))
        else:
            diagonal = log_joint_precision(model, x, theta, latents, prior_curvature, start=start, diagonal=True)
            self._inverse = lambda residual: residual / diagonal

    def times(self, vector: torch.Tensor) -> torch.Tensor:
        r""":math:`\Lambda v`."""
        with torch.enable_grad():
            _, pushed = jvp(self._outputs, (self.point,), (vector,))
            (pulled,) = self._pullback(torch.einsum("nkl,nl->nk", self._hessian, pushed.detach()))
        return pulled.detach() + self.prior * vector

    def precondition(self, residual: torch.Tensor) -> torch.Tensor:
        r""":math:`M^{-1} r`."""
        return self._inverse(residual)


def cg_decrement(operator: PrecisionOperator, gradient: torch.Tensor, tolerance: float, *,
                 verdict_only: bool = False) -> float:
    r""":math:`\delta` of ``gradient`` by preconditioned conjugate gradients on :math:`\Lambda s = g` from
    :math:`s = 0`, stopped as the module notes say or after :data:`CG_MAX_ITER` iterations (the estimate then
    includes the residual term, however large); with ``verdict_only``, stopped too as soon as :math:`\delta_k`
    exceeds ``tolerance`` (the value returned is then above the tolerance but may fall well short of :math:`\delta`)."""
    direction = torch.zeros_like(gradient)
    residual = gradient.clone()
    preconditioned = operator.precondition(residual)
    search = preconditioned.clone()
    product = float(residual @ preconditioned)
    for _ in range(CG_MAX_ITER):
        curved = operator.times(search)
        step = product / float(search @ curved)
        direction += step * search
        residual -= step * curved
        preconditioned = operator.precondition(residual)
        next_product = float(residual @ preconditioned)
        explained = float(gradient @ direction + residual @ direction)
        if verdict_only and explained > tolerance**2:
            break
        if next_product <= CG_RESIDUAL_SHARE**2 * max(explained, tolerance**2) or (
                explained > (FAR * tolerance) ** 2 and next_product <= FAR_SHARE**2 * explained):
            break
        search = preconditioned + next_product / product * search
        product = next_product
    return math.sqrt(max(explained + next_product, 0.0))
