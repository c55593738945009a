"""The record of every fit centred on one MAP estimate (the MAP method, Laplace)."""

from __future__ import annotations

from dataclasses import dataclass

from bnn.inference.core.record import FitRecord
from bnn.inference.map_search.advice import MINIBATCH_FIX, map_advice
from bnn.inference.map_search.map_options import MapFitOptions
from bnn.inference.map_search.minibatch_map import MINIBATCH_POLISH


@dataclass(kw_only=True)
class MapFitRecord(FitRecord):
    """What every fit centred on one MAP estimate records about it (the MAP method, Laplace).

    Attributes
    ----------
    options : MapFitOptions
        The options it ran with (the MAP fit's, and the method's own).
    map_lbfgs_iterations : int
        Iterations of the polish (Levenberg-Marquardt or L-BFGS, :attr:`map_polish`) of the MAP fit.
    map_grad_norm : float
        The norm of the log joint's gradient at the MAP (see :attr:`MapEstimate.grad_norm`).
    map_newton_decrement : float, optional
        The Newton decrement there, in posterior standard deviations (see :attr:`MapEstimate.newton_decrement`).
    map_polish : str, optional
        ``"levenberg-marquardt"``, ``"levenberg-marquardt, then lbfgs"`` (L-BFGS went on where Levenberg-Marquardt
        stopped short) or ``"lbfgs"``; L-BFGS in whitened coordinates is ``"lbfgs, kron-whitened"``.
    map_converged : bool
        Whether the Newton decrement is at most the tolerance, or the log joint stopped rising (:attr:`map_last_rise`
        at most half the tolerance squared: :mod:`bnn.inference.map_search.map_estimate`).
    noise : float, optional
        The noise scale of a learned Gaussian noise (module notes).
    map_at_kink : bool
        Whether the MAP stopped at a kink of the log joint (see :attr:`MapEstimate.at_kink`).
    map_stalled : bool
        Whether its polish stalled before its iteration limit (see :attr:`MapEstimate.stalled`).
    map_last_rise : float, optional
        The rise of the log joint over the last L-BFGS window of the polish (see :attr:`MapEstimate.last_rise`).
    map_noise_ratio : float, optional
        A minibatch fit's full gradient against one batch's gradient noise at its end (see
        :attr:`MapEstimate.noise_ratio`).
    """

    options: MapFitOptions
    map_lbfgs_iterations: int
    map_grad_norm: float
    map_converged: bool
    map_newton_decrement: float | None = None
    map_polish: str | None = None
    noise: float | None = None
    map_at_kink: bool = False
    map_stalled: bool = False
    map_last_rise: float | None = None
    map_noise_ratio: float | None = None

    @property
    def converged(self) -> bool:
        """Whether the MAP converged."""
        return self.map_converged

    def problems(self) -> list[str]:
        if self.map_converged:
            return []
        if self.map_polish is not None and self.map_polish.startswith(MINIBATCH_POLISH):
            how = self.map_polish.removeprefix("none: ")
            return [f"the MAP did not converge: fitted on minibatches ({how}), it stopped before it settled (gradient "
                    f"norm {self.map_grad_norm:.3g} over all rows, {self.map_noise_ratio:.2g} of one batch's gradient "
                    f"noise); {MINIBATCH_FIX}"]
        off = "" if self.map_newton_decrement is None else f"{self.map_newton_decrement:.3g} posterior sd from the mode, "
        return [f"the MAP did not converge (gradient norm {self.map_grad_norm:.3g}, {off}after {self.options.map_steps} Adam "
                f"steps and {self.map_lbfgs_iterations} {self.map_polish or 'polish'} iterations): "
                f"{map_advice(self.map_at_kink, self.map_stalled)}"]
