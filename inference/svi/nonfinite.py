r"""A non-finite ELBO: the step that would apply it is refused, and the error names where it came from.

The loss :math:`-\mathcal{L}(\phi)` or its gradient turns NaN or infinite when a step throws the
guide's parameters where a scale underflows to zero or overflows
(:math:`\operatorname{softplus}(\rho) \to 0` for :math:`\rho \ll 0`) or activations overflow.
Applying such a gradient would make every parameter NaN, so :func:`guarded_step` checks the
loss and each gradient before the optimiser runs. A distribution whose parameter left its
support (Pyro's validation raises ``ValueError`` in the forward pass) is the same failure met
before the gradient. :func:`diagnose` names the culprits: the parameters whose gradient
(:class:`NonFiniteStep` carries them) or value is not finite, and the sample sites whose value
or log-density is not finite when the guide and the model run again with validation off.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyro
import torch
from pyro import poutine

HINT = ("lower lr (now {lr}), or start the guide narrower (guide_options: a smaller init_scale for autonormal, "
        "a lower init_rho for meanfield and empirical-bayes)")


KEPT_POSTERIOR = "error.posterior holds draws from the guide with the parameters before that step"


class NonFiniteStep(FloatingPointError):
    """An SVI step's loss or gradient is not finite; no parameter was updated.

    Attributes
    ----------
    loss : float
        The step's loss.
    parameters : list of str
        The parameters whose gradient has a NaN or infinite entry.
    """

    def __init__(self, loss: float, parameters: list[str]) -> None:
        super().__init__(f"loss {loss}, non-finite gradients of {parameters}")
        self.loss, self.parameters = loss, parameters


class NonFiniteELBOError(ValueError):
    """SVI stopped at a non-finite ELBO; the state before the failing step is kept.

    Attributes
    ----------
    step : int
        The failing step (the parameters are those after ``step`` steps).
    posterior : Posterior or None
        Draws from the guide with the last finite parameters (its ``info["stopped"]`` says why); ``None`` when
        the likelihood cannot be built on those parameters' draws (a noise scale drawn at 0).
    checkpoint : Path or None
        The checkpoint of that state, when the fit had a ``checkpoint_dir``.
    """

    def __init__(self, step: int, cause: str, culprits: list[str], *, lr: float, posterior,
                 checkpoint: Path | None) -> None:
        where = f"not finite: {', '.join(culprits)}" if culprits else "no parameter or site could be named"
        kept = (KEPT_POSTERIOR if posterior is not None
                else "no posterior is kept: the draws of the parameters before that step are not finite, or the "
                "likelihood cannot be built on them")
        if checkpoint is not None:
            kept += f", and {checkpoint} holds its state"
        super().__init__(f"SVI stopped at step {step}: {cause}; {where}. {kept}. Hint: {HINT.format(lr=lr)}")
        self.step, self.posterior, self.checkpoint = step, posterior, checkpoint


def guarded_step(loss, model, guide, optimiser, params, *args, **kwargs) -> tuple[float, tuple[torch.Tensor, ...]]:
    """One step of ``pyro.infer.SVI.step``, but with the loss and every gradient checked before the
    optimiser runs.

    Parameters
    ----------
    loss : pyro.infer.ELBO
        The loss; ``model``, ``guide`` and ``args, kwargs`` its arguments.
    optimiser : PyroOptim
        Steps the parameters.
    params : tuple of torch.Tensor or None
        The unconstrained parameters the loss reads, when known: a JIT-compiled loss reads those of its first
        call at every step (Pyro's compiled function refuses a parameter created later). ``None``: the ones
        this step reads, captured by a param-only trace (as ``SVI.step`` does at every step).

    Returns
    -------
    tuple
        The loss, and the parameters stepped.

    Raises
    ------
    NonFiniteStep
        When the loss or a gradient is not finite (the gradients are cleared, the parameters untouched).
    """
    if params is None:
        with poutine.trace(param_only=True) as capture:
            value = loss.loss_and_grads(model, guide, *args, **kwargs)
        params = tuple({site["value"].unconstrained() for site in capture.trace.nodes.values()})
    else:
        value = loss.loss_and_grads(model, guide, *args, **kwargs)
    sums = [p.grad.sum() for p in params if p.grad is not None]
    # one sum per gradient and a single sync: a NaN or an infinity makes the total non-finite
    if not math.isfinite(value) or (sums and not math.isfinite(sum(sums).item())):
        store = pyro.get_param_store()
        bad = sorted(store.param_name(p) for p in params if p.grad is not None and not torch.isfinite(p.grad).all())
        clear_grads(params)
        raise NonFiniteStep(value, bad)
    optimiser(params)
    clear_grads(params)
    return value, params


def clear_grads(params) -> None:
    """Drop the gradients of ``params`` (the next backward pass writes them afresh, as it would add to zeros)."""
    for p in params:
        p.grad = None


def _non_finite_places(model, guide, *args, **kwargs) -> list[str]:
    """Param-store parameters that are not finite, and the sample sites of one run of ``guide`` and of
    ``model`` replayed on its draws (validation off) whose value or log-density is not finite."""
    found = [f"parameter {name!r} (value)" for name, value in pyro.get_param_store().named_parameters()
             if not torch.isfinite(value).all()]
    try:
        with torch.no_grad(), pyro.validation_enabled(False):
            guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
            model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
            for role, trace in (("guide", guide_trace), ("model", model_trace)):
                trace.compute_log_prob()
                for name, site in trace.nodes.items():
                    if site["type"] != "sample":
                        continue
                    if not torch.isfinite(site["value"]).all():
                        found.append(f"{role} site {name!r} (value)")
                    elif not torch.isfinite(site["log_prob"]).all():
                        found.append(f"{role} site {name!r} (log-density)")
    except Exception:  # noqa: BLE001 - a model that cannot run again leaves the parameters as the only lead
        pass
    return found


def diagnose(error: Exception, model, guide, *args, **kwargs) -> tuple[str, list[str]] | None:
    """What went wrong in a step that raised ``error`` with arguments ``args, kwargs``: a cause and the
    places that are not finite, or ``None`` for a ``ValueError`` no non-finite number explains (a bug
    to raise as it is). Run it with torch's RNG at the failing step's state to see that step's draws."""
    places = _non_finite_places(model, guide, *args, **kwargs)
    if isinstance(error, NonFiniteStep):
        cause = f"the ELBO became {-error.loss}" if not math.isfinite(error.loss) else "a gradient became non-finite"
        return cause, [f"gradient of parameter {name!r}" for name in error.parameters] + places
    if not places:
        return None
    return f"a distribution got an invalid parameter ({str(error).splitlines()[0].rstrip(':')})", places
