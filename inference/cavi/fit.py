r"""Coordinate-ascent variational inference (CAVI) for the Normal-Gamma regression, in closed form.

The mean-field family :math:`q(w)\,q(\tau)` drops the posterior's coupling of :math:`w` and
:math:`\tau`. Each coordinate update sets one factor to
:math:`q^*(z_j) \propto \exp \mathbb{E}_{q(z_{-j})}[\ln p(y, w, \tau)]`, the maximiser of the ELBO
(:mod:`bnn.inference.cavi.elbo`) with the other factor fixed, so the ELBO never decreases:

.. math::

    q(w) &= \mathcal{N}\big(m_N,\; V_N / \mathbb{E}[\tau]\big),\qquad
        V_N^{-1} = V_0^{-1} + X^\top X,\quad m_N = V_N (V_0^{-1} m_0 + X^\top y), \\
    q(\tau) &= \mathrm{Gamma}\Big(a_0 + \tfrac{n + d}{2},\;
        b_0 + \tfrac12\,\mathbb{E}_{q(w)}\big[\lVert y - Xw\rVert^2 + (w - m_0)^\top V_0^{-1}(w - m_0)\big]\Big).

The mean of :math:`q(w)` is the exact posterior mean :math:`m_N` from the first sweep on; only the
scale :math:`\mathbb{E}[\tau]` iterates, :math:`e \mapsto (a_N + d/2) / (b_N + d / (2e))`, to the fixed
point :math:`\mathbb{E}[\tau] = a_N / b_N`, the exact posterior mean of :math:`\tau` (a contraction with
factor :math:`(d/2)/(a_N + d/2)`). There :math:`\operatorname{Cov}_q[w] = (b_N/a_N)\,V_N`, smaller than the
exact :math:`(b_N/(a_N - 1))\,V_N` by the factor :math:`(a_N - 1)/a_N`, and
:math:`\operatorname{Var}_q[\tau] = a_N^2 / (b_N^2 (a_N + d/2))`, smaller than the exact :math:`a_N/b_N^2`
by :math:`a_N/(a_N + d/2)`: mean-field underestimates both (:mod:`bnn.inference.cavi.exact`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from bnn.inference.cavi.data import check_regression_data
from bnn.inference.cavi.elbo import expected_penalised_residual, meanfield_elbo
from bnn.inference.cavi.exact import conditional_weight_posterior
from bnn.inference.cavi.moments import WeightsAndPrecision
from bnn.inference.cavi.prior import NormalGammaPrior

from bnn.options import positive_int, positive_number


@dataclass(frozen=True)
class CAVIResult(WeightsAndPrecision):
    r"""The fitted factors :math:`q(w) = \mathcal{N}(\mu, \Sigma)`, :math:`q(\tau) = \mathrm{Gamma}(a, b)` and the ELBO trace.

    Attributes
    ----------
    weight_mean, weight_covariance : torch.Tensor
        :math:`\mu` ``(d,)`` and :math:`\Sigma` ``(d, d)``.
    tau_shape, tau_rate : float
        :math:`a, b` of :math:`q(\tau)`; ``tau_mean``, ``tau_variance`` and ``weight_variance``
        (:class:`~bnn.inference.cavi.moments.WeightsAndPrecision`) are the moments under :math:`q`.
    elbo : tuple of float
        :math:`\mathcal{L}(q)` after each sweep (an update of :math:`q(w)`, then of :math:`q(\tau)`).
    converged : bool
        Whether the last sweep changed :math:`\mathbb{E}_q[\tau]` by at most ``tolerance`` relative (the mean of
        :math:`q(w)` is fixed from the first sweep on, so then neither factor moves).
    """

    weight_mean: torch.Tensor
    weight_covariance: torch.Tensor
    tau_shape: float
    tau_rate: float
    elbo: tuple[float, ...]
    converged: bool

    @property
    def iterations(self) -> int:
        """The number of sweeps run."""
        return len(self.elbo)

    def weight_marginals(self) -> torch.distributions.Normal:
        r"""Each :math:`q(w_k) = \mathcal{N}(\mu_k, \Sigma_{kk})`, batch shape ``(d,)``."""
        return torch.distributions.Normal(self.weight_mean, self.weight_variance.sqrt())


def fit_cavi(
    x, y, prior: NormalGammaPrior, *, max_iterations: int = 100, tolerance: float = 1e-12,
    init_tau_mean: float | None = None,
) -> CAVIResult:
    r"""Fit the mean-field :math:`q(w)\,q(\tau)` to the Normal-Gamma regression by CAVI; see the module docstring.

    Parameters
    ----------
    x : array-like
        The design matrix, shape ``(n, d)`` (add a column of ones for an intercept).
    y : array-like
        The targets, shape ``(n,)``.
    prior : NormalGammaPrior
        :math:`\mathrm{NG}(m_0, V_0, a_0, b_0)` with ``d`` weights.
    max_iterations : int
        The most sweeps to run.
    tolerance : float
        Stop when a sweep changes :math:`\mathbb{E}_q[\tau]` by at most ``tolerance`` relative; the error left is
        about ``tolerance`` times :math:`(d/2) / a_N` (the contraction factor over one minus it).
    init_tau_mean : float, optional
        The starting :math:`\mathbb{E}[\tau]`; by default the prior's :math:`a_0 / b_0`.

    Returns
    -------
    CAVIResult
        The factors after the last sweep, the ELBO after each sweep, and whether it converged
        (a ``RuntimeWarning`` when it did not within ``max_iterations``).

    Raises
    ------
    ValueError
        For bad data, a prior that does not match ``x``, or bad options, before any work starts.
    """
    x, y = check_regression_data(x, y, prior)
    max_iterations = positive_int("max_iterations", max_iterations)
    tolerance = positive_number("tolerance", tolerance)
    tau_mean = prior.shape / prior.rate if init_tau_mean is None else positive_number("init_tau_mean", init_tau_mean)
    mean, scaled_covariance = conditional_weight_posterior(x, y, prior)
    tau_shape = prior.shape + (x.shape[0] + x.shape[1]) / 2
    elbo: list[float] = []
    converged = False
    while not converged and len(elbo) < max_iterations:
        covariance = scaled_covariance / tau_mean
        tau_rate = prior.rate + 0.5 * expected_penalised_residual(x, y, prior, mean, covariance).item()
        change = abs(tau_shape / tau_rate - tau_mean) / tau_mean
        tau_mean = tau_shape / tau_rate
        elbo.append(meanfield_elbo(x, y, prior, mean, covariance, tau_shape, tau_rate))
        converged = change <= tolerance
    if not converged:
        warnings.warn(
            f"CAVI stopped after max_iterations={max_iterations} sweeps with E[tau] still changing by {change:.3g} "
            f"relative (tolerance={tolerance:g}); raise max_iterations or loosen tolerance",
            RuntimeWarning,
            stacklevel=2,
        )
    return CAVIResult(mean, covariance, tau_shape, tau_rate, tuple(elbo), converged)
