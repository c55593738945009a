"""What a MAP fit that did not converge, whose evidence search found no maximum, or whose objective is not finite,
tells the user to do."""

from __future__ import annotations

import torch
from bnn.guides.flat_weights import split_flat

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
MINIBATCH_FIX = "raise map_epochs (--map-epochs) or map_batch_lr"
"""What to do about a MAP fitted on minibatches whose objective had not flattened."""
NO_MAXIMUM_FIX = "give the noise (a fixed likelihood scale) or the prior precision (tune_prior_precision=False)"
COLLAPSE_FIX = "use a Gaussian prior (the noise is then chosen by the Laplace evidence) or a fixed noise"


def members_not_converged(what: str, stalled: list[int], minibatch: bool, tolerance: float) -> str:
    """Why the MAP fits of members ``stalled`` are not converged and what to do (``what`` comes before "members": "the
    MAP fits of", "the MAP starts of"): on minibatches, a fit that had not settled; in full batch, the
    polish's tolerance."""
    if minibatch:
        return (f"{what} members {stalled} did not converge: fitted on minibatches, they stopped before they settled "
                f"(an objective still rising, or a full gradient beyond their batches' noise); {MINIBATCH_FIX}")
    return f"{what} members {stalled} did not converge ({NOT_CONVERGED.format(tolerance)}): {RAISE_BUDGET}"


def map_advice(at_kink: bool, stalled: bool) -> str:
    """What to do about a MAP that did not converge: nothing helps at a kink; a stalled polish needs far more."""
    return KINK_ADVICE if at_kink else STALL_ADVICE if stalled else RAISE_BUDGET


def nonfinite_objective(model, x: torch.Tensor, theta: torch.Tensor, loss: float, step: int, lr: float,
                        option: str = "map_lr") -> str:
    """Why Adam's MAP objective is ``loss`` (not finite) at ``step``: past the first step, the rate ``lr`` (the option
    ``option``); at the start
    ``theta`` no step was taken, so the cause is the network's output there (its forward makes NaN or inf) or the log
    joint itself."""
    if step > 0:
        return f"the MAP objective became {loss} at Adam step {step}; lower {option} (now {lr})"
    with torch.no_grad():
        output = model.forward(x, split_flat(model.sites, theta))
    cause = (f"the network's output on the training inputs holds {'NaN' if output.isnan().any() else 'inf'} there, "
             "which its forward makes (a log or a division of a value that can be 0 or negative, a NaN among its "
             "weights or buffers): check the module's forward on x" if not torch.isfinite(output).all() else
             "the likelihood or the prior cannot be evaluated at the starting weights")
    return (f"the MAP objective is {loss} at its start (a draw from the prior), before any step, so {option} is not the "
            f"cause: {cause}")
