r"""A user's module (:func:`bnn.models.from_module`) seen through :mod:`bnn.models.layers`, for the Kronecker-factored
GGN (:mod:`bnn.inference.curvature.kron_curvature`).

Inside :func:`routed_through_layers`, each ``nn.Linear`` on ``(n, d_{in})`` inputs and each ``nn.Conv2d`` (one group,
no dilation, zero padding) of a :class:`~bnn.models.torch_module.TorchModuleNetwork`'s module, with a bias, returns
:func:`bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` of its input, named by its path in the module: the
same output to round-off, which inside :func:`bnn.models.layers.recording` also records the layer's inputs (a
convolution's unfolded patches) and taps its output, as KFAC needs. A layer whose weight and bias are both Bayesian
then has the factors of any network written with the layers: laplace-torch's ``KronLaplace`` on the module
(``tests/inference/laplace/test_laplace_torch_peer.py``). Other layers are left as they are, so their sites lie
outside the recorded layers and ``structure='kron'`` is refused naming the layer (:func:`unrouted_message`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial

import torch
from bnn.models.layers import conv, linear
from bnn.models.torch_module import TorchModuleNetwork
from torch import nn


def _zero_padding(layer: nn.Conv2d) -> tuple[int, ...] | None:
    """The padding of ``layer`` on each side, as :func:`~bnn.models.layers.conv` takes it; ``None`` for ``"same"``
    with an even kernel (padded unequally)."""
    if layer.padding == "valid":
        return (0, 0)
    if layer.padding == "same":
        return tuple(k // 2 for k in layer.kernel_size) if all(k % 2 for k in layer.kernel_size) else None
    return layer.padding


def routes(layer: nn.Module) -> bool:
    """Whether :func:`routed_through_layers` routes ``layer``: an ``nn.Linear`` or a one-group, undilated, zero-padded
    ``nn.Conv2d``, with a bias."""
    if not isinstance(layer, nn.Linear | nn.Conv2d) or layer.bias is None:
        return False
    return isinstance(layer, nn.Linear) or (layer.groups == 1 and layer.dilation == (1, 1)
                                            and layer.padding_mode == "zeros" and _zero_padding(layer) is not None)


def _routed(name: str, layer: nn.Linear | nn.Conv2d, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
    """The forward hook: ``layer``'s output through :mod:`bnn.models.layers` under ``name`` (its own output where the
    input is not one row per data point: a linear layer on sequences, an unbatched image)."""
    (h,) = inputs
    if isinstance(layer, nn.Linear):
        return linear(h, layer.weight, layer.bias, name=name) if h.dim() == 2 else output
    return conv(h, layer.weight, layer.bias, name=name, stride=layer.stride,
                padding=_zero_padding(layer)) if h.dim() == 4 else output


@contextlib.contextmanager
def routed_through_layers(model) -> Iterator[None]:
    """Route the layers of ``model``'s module that :func:`routes` takes (module notes) while open; nothing for a
    network that is not a :class:`~bnn.models.torch_module.TorchModuleNetwork`."""
    handles = []
    if isinstance(model, TorchModuleNetwork):
        handles = [layer.register_forward_hook(partial(_routed, path)) for path, layer in model.module.named_modules()
                   if path and routes(layer)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def unrouted_message(model: TorchModuleNetwork, site: str) -> str:
    """Why ``structure='kron'`` is refused for the module's Bayesian parameter ``site``, naming its layer."""
    path = site.rpartition(".")[0]
    layer = model.module.get_submodule(path)
    return (f"structure='kron' takes a module's nn.Linear layers on (n, features) inputs and nn.Conv2d layers "
            f"(groups=1, dilation=1, zero padding), each with a bias, called once per forward and with weight and "
            f"bias both Bayesian; {site!r} is in layer {path or '(the module)'!r}, {layer!r}, which is not one: use "
            f"'full', 'diag' or 'last-layer'")
