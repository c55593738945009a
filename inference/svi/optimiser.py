r"""SVI's optimiser: Adam at the base rate, shaped by a learning-rate schedule.

Adam (Kingma & Ba 2015) moves each parameter at step :math:`t` by

.. math::

    \Delta\phi_t = -\,\mathrm{lr}\,\rho(t)\,\frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon},
    \qquad \hat m_t = \frac{m_t}{1 - \beta_1^t}, \quad \hat v_t = \frac{v_t}{1 - \beta_2^t},

with :math:`m_t, v_t` the running means of the gradient and its square at decay rates
:math:`(\beta_1, \beta_2)` = :data:`ADAM_BETAS` and :math:`\rho(t)` the
:class:`~bnn.inference.svi.schedules.LRSchedule`'s factor.
"""

from __future__ import annotations

import torch
from bnn.inference.svi.schedules import LRSchedule
from pyro.optim import Adam, PyroLRScheduler, PyroOptim

ADAM_BETAS = (0.9, 0.999)
"""Adam's moment decay rates :math:`(\\beta_1, \\beta_2)` (torch's defaults)."""
ADAM_OPTIONS = {"betas": ADAM_BETAS, "fused": True}
"""torch's fused Adam: the same update in one kernel per parameter instead of a dozen tensor operations
(``benchmarks/svi_speed.py``)."""


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
        ``pyro.optim.Adam``, or a ``PyroLRScheduler`` whose ``step()`` the loop calls after each step.
    """
    if schedule is LRSchedule.CONSTANT:
        return Adam({"lr": lr, **ADAM_OPTIONS})
    return PyroLRScheduler(
        torch.optim.lr_scheduler.LambdaLR,
        {
            "optimizer": torch.optim.Adam,
            "optim_args": {"lr": lr, **ADAM_OPTIONS},
            "lr_lambda": lambda t: schedule.factor(t, total_steps, final_lr_fraction),
        },
    )
