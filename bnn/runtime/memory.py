r"""The memory a fit needs, checked against the machine's before any work starts.

For a model of :math:`D` parameters on :math:`N` examples a fit holds at least

- the network on the data, activations and their gradients: :math:`2N \sum_l w_l` values, :math:`w_l` the widths of
  the network's stages (``model.activation_widths()``: an MLP's inputs, hidden layers and outputs);
- what its method keeps (:meth:`bnn.options.Options.memory_needs`): every posterior's draws (draws :math:`\times D`),
  an optimiser's state (Adam: parameters, gradients and two moments, :math:`4D`; SVI's guide doubles it), NUTS's
  chains (chains :math:`\times` (warmup + samples) :math:`\times D`), Laplace's curvature (:math:`D^2` for the
  full structure), a MAP fit's polish (L-BFGS's history at its full length of :math:`H` pairs, reached after :math:`H`
  iterations, :math:`(2H + 4) D`); of stages that run one after the other
  (a MAP fit, then Laplace's curvature) the largest (:func:`peak_stage`).

The sum is a floor of what a fit that runs its course holds (Python, the libraries and temporaries come on top): a
fit refused here could not have run to its end (a MAP polish that stops within :math:`H` iterations holds less).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import psutil
import torch

GIB = 2**30


def machine_memory() -> tuple[int, int]:
    """The machine's memory in bytes: ``(total, available)``."""
    memory = psutil.virtual_memory()
    return memory.total, memory.available


def parameter_count(model) -> int:
    """:math:`D`, the number of latent values of ``model`` (weights, biases, likelihood latents)."""
    return sum(math.prod(shape) for shape in model.latent_shapes.values())


def value_bytes(count: int, dtype: torch.dtype | None = None) -> int:
    """Bytes of ``count`` values of ``dtype`` (default: torch's default dtype, the one fits compute in)."""
    return count * (dtype or torch.get_default_dtype()).itemsize


def network_needs(model, num_data: int) -> dict[str, int]:
    """The network's activations and their gradients on ``num_data`` examples, in bytes."""
    widths = sum(model.activation_widths())
    return {"activations on the data": value_bytes(2 * num_data * widths)}


def peak_stage(*stages: Mapping[str, int]) -> dict[str, int]:
    """The needs of the stage that holds the most, of ``stages`` run one after the other (what one stage frees
    before the next starts is not summed)."""
    return dict(max(stages, key=lambda needs: sum(needs.values())))


def _gib(size: int) -> str:
    return f"{size / GIB:.3g} GiB"


def check_memory(method: str, needs: Mapping[str, int]) -> None:
    """Refuse, with the numbers and the fix, a fit whose ``needs`` (bytes, by what holds them) exceed the memory
    available on this machine.

    Raises
    ------
    ValueError
        When the sum of ``needs`` exceeds the available memory.
    """
    needed = sum(needs.values())
    total, available = machine_memory()
    if needed <= available:
        return
    parts = ", ".join(f"{what} {_gib(size)}" for what, size in needs.items() if size)
    raise ValueError(f"method {method!r} needs at least {_gib(needed)} for this model and data ({parts}), but this "
                     f"machine has {_gib(available)} available of {_gib(total)}; use smaller hidden widths, fewer draws "
                     "(num_samples, num_chains) or less data, or run where more memory is free")
