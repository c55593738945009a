"""Where a fit computes: ``device="cpu"``, ``"cuda"`` or ``"auto"`` (a GPU where torch sees one, else the CPU).

A fit on a GPU moves a copy of the network and the training tensors there and computes under
``with torch.device(...)``, so that every tensor the method makes without naming a device (its draws, its optimiser's
state, Pyro's parameters) is made there too; the posterior comes back on the CPU, where saving, ArviZ and the plots
read it. Worker processes compute on the CPU, so a GPU fit runs its members and chains one after the other in its own
process. ``"cuda"`` on a machine without one is refused when the options are parsed, before any work; a method whose
computation stays on the CPU (NUTS: a compiled CPU kernel in worker processes) says so and takes ``"cpu"`` or
``"auto"`` only.
"""

from __future__ import annotations

import enum
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from bnn.options import Options, option, parse_option

T = TypeVar("T")


class Device(str, enum.Enum):
    """The devices a fit computes on."""

    CPU = "cpu"
    CUDA = "cuda"
    AUTO = "auto"


def device_option(name: str, value: Any) -> Device:
    """``value`` as a :class:`Device`; ``ValueError`` for an unknown name, and for ``"cuda"`` where torch sees no
    CUDA device (a CPU build of torch, or no GPU), naming the fix."""
    chosen = parse_option(Device, value.type if isinstance(value, torch.device) else value, name)
    if chosen is Device.CUDA and not torch.cuda.is_available():
        raise ValueError(f"{name}='cuda', and torch sees no CUDA device here (torch {torch.__version__}, "
                         "torch.cuda.is_available() is False: a CPU build of torch or no GPU); use device='cpu', or "
                         "device='auto' to take a GPU only where there is one")
    return chosen


@dataclass(frozen=True)
class DeviceOptions(Options):
    """The device option every method's option set takes.

    Attributes
    ----------
    device : {"cpu", "cuda", "auto"}
        Where the fit computes: the CPU, the GPU (refused where torch sees none) or ``auto`` (the GPU where there is
        one); the posterior comes back on the CPU either way.
    """

    device: Device = option(Device.CPU, device_option)


def resolved_device(chosen: Device, gpu: bool = True) -> torch.device:
    """The torch device ``chosen`` names: ``auto`` is the GPU where torch sees one and ``gpu`` (the method computes
    there), else the CPU."""
    if chosen is Device.AUTO:
        return torch.device("cuda" if gpu and torch.cuda.is_available() else "cpu")
    return torch.device(chosen.value)


def moved(value: T, device: torch.device) -> T:
    """A copy of ``value`` (a network, a posterior: any picklable object) with every tensor it holds on ``device``,
    made by a round trip through :func:`torch.save` and :func:`torch.load`'s ``map_location``."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location=device, weights_only=False)


@contextmanager
def computing_on(device: torch.device) -> Iterator[None]:
    """Within the block, tensors made without a device are made on ``device`` (nothing changes on the CPU)."""
    if device.type == "cpu":
        yield
        return
    with torch.device(device):
        yield


def on_gpu() -> bool:
    """Whether the code runs inside :func:`computing_on` a GPU (members and chains then stay in this process)."""
    return torch.get_default_device().type != "cpu"
