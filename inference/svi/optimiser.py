r"""SVI's optimiser: Adam at the base rate, shaped by a learning-rate schedule.

Adam (Kingma & Ba 2015) moves each parameter at step :math:`t` by

.. math::

    \Delta\phi_t = -\,\mathrm{lr}\,\rho(t)\,\frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon},
    \qquad \hat m_t = \frac{m_t}{1 - \beta_1^t}, \quad \hat v_t = \frac{v_t}{1 - \beta_2^t},

with :math:`m_t, v_t` the running means of the gradient and its square at decay rates
:math:`(\beta_1, \beta_2)` = :data:`ADAM_BETAS` and :math:`\rho(t)` the
:class:`~bnn.inference.svi.schedules.LRSchedule`'s factor.

The update is torch's fused Adam kernel (one per parameter). Pyro's optimiser holds one
``torch.optim.Adam`` per parameter and calls its ``step()``, whose wrapper (hooks, profiler
records, grouping the tensors by device and dtype) costs several times the kernel on a network of
this collection's size; :class:`FusedAdamSteps` calls the kernel that ``step()`` would call, on the
state that ``step()`` created, so the numbers, the optimiser's state and its checkpoints are
unchanged (``tests/inference/svi/test_optimiser.py`` holds it to ``step()`` bit for bit).
"""

from __future__ import annotations

import torch
from bnn.inference.svi.schedules import LRSchedule
from pyro.optim import PyroLRScheduler, PyroOptim

ADAM_BETAS = (0.9, 0.999)
"""Adam's moment decay rates :math:`(\\beta_1, \\beta_2)` (torch's defaults)."""
ADAM_OPTIONS = {"betas": ADAM_BETAS, "fused": True}
"""torch's fused Adam: the same update in one kernel per parameter instead of a dozen tensor operations
(``benchmarks/svi_speed.py``)."""


class FusedAdamSteps:
    """Pyro's per-parameter Adam, each step after a parameter's first applied by torch's fused Adam kernel itself.

    Mixed into a ``PyroOptim`` (or ``PyroLRScheduler``) over ``torch.optim.Adam`` with ``fused=True``. A
    parameter's first step, one with gradient clipping, one without a gradient, and Adam's variants (AMSGrad,
    decoupled weight decay, maximising, not fused) go through Pyro's own call (it creates the optimiser, loads a
    resumed state, creates the moments); every other step increments the step count and runs
    ``torch._fused_adam_`` with the optimiser's parameter group, as ``torch.optim.Adam.step`` does, so a
    schedule's rate applies as before.
    """

    def __call__(self, params, *args, **kwargs) -> None:
        for p in params:
            optimiser = self.optim_objs.get(p)
            adam = getattr(optimiser, "optimizer", optimiser)  # a scheduler wraps its optimiser
            state = None if adam is None else adam.state.get(p)
            group = None if adam is None else adam.param_groups[0]
            if (not state or p.grad is None or self.grad_clip[p] is not None or not group["fused"]
                    or group["amsgrad"] or group["decoupled_weight_decay"] or group["maximize"]):
                super().__call__([p], *args, **kwargs)
                continue
            beta1, beta2 = group["betas"]
            with torch.no_grad():
                state["step"].add_(1)
                torch._fused_adam_([p], [p.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [], [state["step"]],
                                   amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2,
                                   weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                                   grad_scale=None, found_inf=None)


class FusedAdam(FusedAdamSteps, PyroOptim):
    """Adam at a constant rate (:class:`FusedAdamSteps`)."""

    def __init__(self, adam_args: dict) -> None:
        super().__init__(torch.optim.Adam, adam_args)


class FusedAdamScheduler(FusedAdamSteps, PyroLRScheduler):
    """Adam under a ``torch.optim.lr_scheduler`` (:class:`FusedAdamSteps`); its ``step()`` moves the schedule on."""


def make_optimiser(lr: float, schedule: LRSchedule, total_steps: int, final_lr_fraction: float) -> PyroOptim:
    r"""Adam at rate ``lr`` shaped by ``schedule`` over ``total_steps``.

    Parameters
    ----------
    lr : float
        The base rate.
    schedule : LRSchedule
        :math:`\rho(t)`; a constant rate gets plain Adam, which takes the same steps as a
        scheduler with :math:`\rho \equiv 1` without the scheduler's work at every step.
    total_steps : int
        :math:`T`, the run's length.
    final_lr_fraction : float
        :math:`r`, with :math:`\rho(T) = r` for the decaying schedules.

    Returns
    -------
    PyroOptim
        :class:`FusedAdam`, or a :class:`FusedAdamScheduler` (a ``PyroLRScheduler``) whose ``step()`` the loop calls
        after each step.
    """
    if schedule is LRSchedule.CONSTANT:
        return FusedAdam({"lr": lr, **ADAM_OPTIONS})
    return FusedAdamScheduler(
        torch.optim.lr_scheduler.LambdaLR,
        {
            "optimizer": torch.optim.Adam,
            "optim_args": {"lr": lr, **ADAM_OPTIONS},
            "lr_lambda": lambda t: schedule.factor(t, total_steps, final_lr_fraction),
        },
    )
