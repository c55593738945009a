r"""Batched linear and convolutional layers that networks call, and the recording that Kronecker-factored curvature
needs from them.

Both layers broadcast over leading sample dimensions of their weights (one weight draw per sample), like the rest of
the collection's networks:

* :func:`linear`: :math:`h W^\top + b` for ``h`` ``(*sample, n, d_in)`` (or ``(n, d_in)``, shared by every draw),
  ``weight`` ``(*sample, d_out, d_in)``, ``bias`` ``(*sample, d_out)``;
* :func:`conv`: a 1-D or 2-D cross-correlation for ``h`` ``(*sample, n, C_in, *spatial)`` (or ``(n, C_in,
  *spatial)``), ``weight`` ``(*sample, C_out, C_in, *kernel)``, ``bias`` ``(*sample, C_out)``, computed as one
  grouped convolution whose groups are the :math:`S` flattened weight draws.

Inside :func:`input_masks` (MC dropout's training opens it) a call whose ``name`` has a mask multiplies its input by it
first: dropout on the layer's inputs, where the network put it (:mod:`bnn.models.dropout`).

Outside a recording they are plain functions. Inside :func:`recording` (the Kronecker-factored Laplace opens it, with
weights free of sample dimensions) each call stores, under its ``name`` (the layer's group: its sites are
``{name}.weight`` and ``{name}.bias``), a :class:`RecordedLayer`: its input :math:`a` (for a convolution the unfolded
patches, one row per output position) and a zero tensor :math:`\epsilon` added to its output, so that the gradient of
anything computed from the output with respect to :math:`\epsilon` is the gradient at the layer's output :math:`g`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class RecordedLayer:
    """What one call of :func:`linear` or :func:`conv` left in a recording.

    Attributes
    ----------
    inputs : torch.Tensor
        The layer's inputs, ``(n, positions, d_in)``: ``positions`` is 1 for a linear layer and the number of output
        positions of a convolution (whose ``d_in`` is :math:`C_{in}` times the kernel's size).
    tap : torch.Tensor
        The zero tensor added to the output, shaped like it, requiring gradients.
    weight, bias : torch.Tensor
        The weight and bias the call used.
    """

    inputs: torch.Tensor
    tap: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    def output_gradients(self, gradient: torch.Tensor) -> torch.Tensor:
        """The gradient at the tap, ``(n, *channels_and_positions)``, as ``(n, positions, d_out)``."""
        if gradient.dim() == 2:
            return gradient.unsqueeze(1)
        return gradient.flatten(2).transpose(1, 2)


_RECORDING: contextvars.ContextVar[dict[str, RecordedLayer] | None] = contextvars.ContextVar("layer_recording",
                                                                                              default=None)


def _active_recording() -> dict[str, RecordedLayer] | None:
    """The recording open now, if any; none inside ``torch.compile`` (NUTS's compiled potential), which cannot trace a
    context variable and never runs inside a recording."""
    return None if torch.compiler.is_compiling() else _RECORDING.get()


@contextlib.contextmanager
def recording() -> Iterator[dict[str, RecordedLayer]]:
    """Record every :func:`linear` and :func:`conv` call inside, keyed by its ``name``, in the dictionary yielded."""
    layers: dict[str, RecordedLayer] = {}
    token = _RECORDING.set(layers)
    try:
        yield layers
    finally:
        _RECORDING.reset(token)


_INPUT_MASKS: contextvars.ContextVar[tuple[Mapping[str, torch.Tensor], set[str]] | None] = contextvars.ContextVar(
    "layer_input_masks", default=None)


@contextlib.contextmanager
def input_masks(masks: Mapping[str, torch.Tensor]) -> Iterator[set[str]]:
    """Multiply the input of every :func:`linear` and :func:`conv` call inside whose ``name`` is a key of ``masks`` by
    that mask (broadcast against the input); yield the set of the names that were called, filled as they are."""
    used: set[str] = set()
    token = _INPUT_MASKS.set((masks, used))
    try:
        yield used
    finally:
        _INPUT_MASKS.reset(token)


def _masked_input(name: str, h: torch.Tensor) -> torch.Tensor:
    """``h`` times the mask of layer ``name`` when :func:`input_masks` has one for it (never inside ``torch.compile``,
    which cannot trace a context variable and never runs inside it)."""
    active = None if torch.compiler.is_compiling() else _INPUT_MASKS.get()
    if active is None or name not in active[0]:
        return h
    masks, used = active
    used.add(name)
    return h * masks[name]


def _record(name: str, inputs: Callable[[], torch.Tensor], output: torch.Tensor, weight: torch.Tensor,
            bias: torch.Tensor, core_dims: int) -> torch.Tensor:
    """``output``, with a tap added and ``inputs()`` recorded under ``name`` when a recording is open (where a weight
    must have its ``core_dims`` dimensions alone, no sample dimensions)."""
    layers = _active_recording()
    if layers is None:
        return output
    if weight.dim() != core_dims:
        raise ValueError(f"layer {name!r}: a recording (structure='kron') runs one weight value without sample "
                         f"dimensions, got a weight of shape {tuple(weight.shape)}")
    if name in layers:
        raise ValueError(f"layer {name!r} was called twice in one forward pass; a recording (structure='kron') needs "
                         "each layer called once: give each call its own name and sites")
    tap = torch.zeros_like(output, requires_grad=True)
    layers[name] = RecordedLayer(inputs().detach(), tap, weight, bias)
    return output + tap


def linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, name: str) -> torch.Tensor:
    r""":math:`h W^\top + b`, batched over the weight's leading sample dimensions.

    Parameters
    ----------
    h : torch.Tensor
        ``(*sample, n, d_in)``, or ``(n, d_in)`` for inputs every draw shares.
    weight, bias : torch.Tensor
        ``(*sample, d_out, d_in)`` and ``(*sample, d_out)``.
    name : str
        The layer's group: its sites are ``{name}.weight`` and ``{name}.bias``.

    Returns
    -------
    torch.Tensor
        ``(*sample, n, d_out)``.
    """
    h = _masked_input(name, h)
    output = torch.matmul(h, weight.transpose(-1, -2)) + bias.unsqueeze(-2)
    return _record(name, lambda: h.unsqueeze(1), output, weight, bias, core_dims=2)


def _conv_arguments(kernel_dims: int, stride, padding) -> tuple[tuple[int, ...], tuple[int, ...]]:
    stride = (stride,) * kernel_dims if isinstance(stride, int) else tuple(stride)
    padding = (padding,) * kernel_dims if isinstance(padding, int) else tuple(padding)
    if len(stride) != kernel_dims or len(padding) != kernel_dims:
        raise ValueError(f"stride and padding need {kernel_dims} entries for a {kernel_dims}-D kernel, got {stride} "
                         f"and {padding}")
    return stride, padding


def _patches(h: torch.Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...]):
    """The unfolded patches of ``h`` ``(n, C_in, *spatial)`` as ``(n, positions, C_in * prod(kernel))``, in the order
    of ``weight.flatten(1)``."""
    if len(kernel) == 1:  # unfold is 2-D only: a 1-D signal is an image of height 1
        h, kernel, stride, padding = h.unsqueeze(2), (1, *kernel), (1, *stride), (0, *padding)
    return F.unfold(h, kernel, padding=padding, stride=stride).transpose(1, 2)


def conv(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, name: str, stride=1, padding=0) -> torch.Tensor:
    r"""A 1-D or 2-D convolution (cross-correlation, as :func:`torch.nn.functional.conv1d`/``conv2d``), batched over
    the weight's leading sample dimensions in one grouped convolution.

    Parameters
    ----------
    h : torch.Tensor
        ``(*sample, n, C_in, *spatial)``, or ``(n, C_in, *spatial)`` for inputs every draw shares.
    weight, bias : torch.Tensor
        ``(*sample, C_out, C_in, *kernel)`` with one or two kernel dimensions, and ``(*sample, C_out)``.
    name : str
        The layer's group: its sites are ``{name}.weight`` and ``{name}.bias``.
    stride, padding : int or tuple of int
        As :func:`torch.nn.functional.conv2d`'s.

    Returns
    -------
    torch.Tensor
        ``(*sample, n, C_out, *spatial_out)``.
    """
    h = _masked_input(name, h)
    kernel_dims = weight.dim() - bias.dim() - 1
    if kernel_dims not in (1, 2) or weight.shape[:-kernel_dims - 2] != bias.shape[:-1]:
        raise ValueError(f"layer {name!r}: weight must be (*sample, C_out, C_in, *kernel) with 1 or 2 kernel dimensions "
                         f"and bias (*sample, C_out), got {tuple(weight.shape)} and {tuple(bias.shape)}")
    stride, padding = _conv_arguments(kernel_dims, stride, padding)
    sample = weight.shape[: -kernel_dims - 2]
    c_out, c_in, kernel = weight.shape[-kernel_dims - 2], weight.shape[-kernel_dims - 1], weight.shape[-kernel_dims:]
    channel_dim = h.dim() - kernel_dims - 1
    if channel_dim < 1 or h.shape[:channel_dim - 1] not in (torch.Size(), sample) or h.shape[channel_dim] != c_in:
        raise ValueError(f"layer {name!r}: h must be (*sample, n, {c_in}, *spatial) or (n, {c_in}, *spatial) for a "
                         f"weight of shape {tuple(weight.shape)}, got {tuple(h.shape)}")
    draws = sample.numel()
    n, spatial = h.shape[channel_dim - 1], h.shape[channel_dim + 1 :]
    shared = h.expand(*sample, n, c_in, *spatial).reshape(draws, n, c_in, *spatial)
    stacked = shared.transpose(0, 1).reshape(n, draws * c_in, *spatial)  # the draws side by side as channel groups
    convolve = F.conv1d if kernel_dims == 1 else F.conv2d
    output = convolve(stacked, weight.reshape(draws * c_out, c_in, *kernel), bias.reshape(draws * c_out),
                      stride=stride, padding=padding, groups=draws)
    output = output.reshape(n, draws, c_out, *output.shape[2:]).transpose(0, 1).reshape(*sample, n, c_out,
                                                                                        *output.shape[2:])
    return _record(name, lambda: _patches(h, tuple(kernel), stride, padding), output, weight, bias,
                   core_dims=kernel_dims + 2)
