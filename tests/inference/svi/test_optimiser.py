"""SVI's optimiser: its direct fused-Adam steps are ``torch.optim.Adam.step`` bit for bit, under every schedule, and
its state saves and restores as Pyro's does."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.inference.svi.optimiser import ADAM_OPTIONS, FusedAdam, make_optimiser
from bnn.inference.svi.schedules import LRSchedule

STEPS = 25
LR = 0.05


def gradients(seed: int, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """A fixed sequence of gradients, some large, some tiny, one exactly zero."""
    generator = torch.Generator().manual_seed(seed)
    grads = [torch.randn(shape, generator=generator) * 10.0 ** torch.randint(-4, 3, (), generator=generator)
             for _ in range(STEPS)]
    grads[3] = torch.zeros(shape)
    return grads


def torch_adam_run(start: torch.Tensor, grads: list[torch.Tensor], schedule: LRSchedule) -> torch.Tensor:
    """The same steps by ``torch.optim.Adam(fused=True).step()``, the rate set per step by ``schedule``."""
    p = start.clone().requires_grad_()
    adam = torch.optim.Adam([p], lr=LR, **ADAM_OPTIONS)
    scheduler = torch.optim.lr_scheduler.LambdaLR(adam, lambda t: schedule.factor(t, STEPS, 0.1))
    for grad in grads:
        p.grad = grad.clone()
        adam.step()
        scheduler.step()
    return p.detach()


def pyro_run(start: torch.Tensor, grads: list[torch.Tensor], schedule: LRSchedule) -> torch.Tensor:
    """The steps by :func:`make_optimiser`'s optimiser on a param-store parameter, as SVI's loop takes them."""
    pyro.clear_param_store()
    pyro.param("w", start.clone())
    p = pyro.param("w").unconstrained()
    optimiser = make_optimiser(LR, schedule, STEPS, 0.1)
    for grad in grads:
        p.grad = grad.clone()
        optimiser([p])
        if schedule is not LRSchedule.CONSTANT:
            optimiser.step()
    return p.detach().clone()


@pytest.mark.parametrize("schedule", list(LRSchedule))
def test_its_steps_are_torch_adams_bit_for_bit(schedule):
    start = torch.randn(2, 7, generator=torch.Generator().manual_seed(0))
    grads = gradients(1, (2, 7))
    assert torch.equal(pyro_run(start, grads, schedule), torch_adam_run(start, grads, schedule))


def test_its_state_restores_into_a_new_optimiser_and_the_steps_go_on_as_if_never_stopped():
    start, grads = torch.randn(5, generator=torch.Generator().manual_seed(2)), gradients(3, (5,))
    whole = pyro_run(start, grads, LRSchedule.CONSTANT)
    pyro.clear_param_store()
    p = pyro.param("w", start.clone()).unconstrained()
    first = FusedAdam({"lr": LR, **ADAM_OPTIONS})
    for grad in grads[:10]:
        p.grad = grad.clone()
        first([p])
    second = FusedAdam({"lr": LR, **ADAM_OPTIONS})
    second.set_state(first.get_state())
    for grad in grads[10:]:
        p.grad = grad.clone()
        second([p])
    assert torch.equal(p.detach(), whole)


def test_adams_variants_take_torchs_own_step():
    """AMSGrad (not fused here) goes through ``step()``: the numbers are torch's AMSGrad, not plain Adam's."""
    start, grads = torch.randn(4, generator=torch.Generator().manual_seed(4)), gradients(5, (4,))
    pyro.clear_param_store()
    p = pyro.param("w", start.clone()).unconstrained()
    optimiser = FusedAdam({"lr": LR, "amsgrad": True})
    reference = start.clone().requires_grad_()
    adam = torch.optim.Adam([reference], lr=LR, amsgrad=True)
    for grad in grads:
        p.grad, reference.grad = grad.clone(), grad.clone()
        optimiser([p])
        adam.step()
    assert torch.equal(p.detach(), reference.detach())
    assert not torch.equal(p.detach(), torch_adam_run(start, grads, LRSchedule.CONSTANT))
