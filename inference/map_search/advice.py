"""What a MAP fit that did not converge, or whose evidence search found no maximum, tells the user to do."""

from __future__ import annotations

RAISE_BUDGET = "raise map_max_iter or map_steps (or map_lr), or loosen map_tolerance"
NOT_CONVERGED = "Newton decrement above map_tolerance={:g}, and the log joint not flat when the polish stopped"
"""Why a MAP fit is not converged (:mod:`bnn.inference.map_search.map_estimate`), with the tolerance to format in."""
KINK_ADVICE = ("it stopped at a kink, where the log joint falls along its own gradient (a ReLU unit or a max-pooling "
               "window switching exactly at training inputs makes the gradient one-sided), so the Newton decrement "
               "overstates the distance to the mode; the fit counts as converged once L-BFGS no longer raises the log "
               "joint: raise map_max_iter to let it get there. The Laplace approximation there uses one side's "
               "curvature. A smooth activation (tanh, silu) and average pooling (BayesianCNN's pooling='avg') avoid kinks")
STALL_ADVICE = ("the polish stalled: at the rise of the log joint of its last steps it would not reach map_tolerance "
                "within map_max_iter (near the kinks of ReLU units or max-pooling the steps that raise it shrink toward "
                "zero); raise map_max_iter far above the iterations taken, loosen map_tolerance, or use a smooth "
                "activation (tanh, silu) and average pooling (BayesianCNN's pooling='avg')")
NO_MAXIMUM_FIX = "give the noise (a fixed likelihood scale) or the prior precision (tune_prior_precision=False)"
COLLAPSE_FIX = "use a Gaussian prior (the noise is then chosen by the Laplace evidence) or a fixed noise"


def map_advice(at_kink: bool, stalled: bool) -> str:
    """What to do about a MAP that did not converge: nothing helps at a kink; a stalled polish needs far more."""
    return KINK_ADVICE if at_kink else STALL_ADVICE if stalled else RAISE_BUDGET
