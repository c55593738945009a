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

Inside :func:`local_reparameterisation` (the mean-field guide opens it in the ELBO, Kingma, Salimans and Welling 2015)
a call whose ``name`` has a :class:`LayerGaussian` ignores the values of its weight draws (it keeps their sample
shape) and draws its output from the Gaussian that the output has under independent Gaussian weights and bias: for a
linear layer, per row and output unit,

.. math::

    s_j \sim \mathcal{N}\Big(\sum_i h_i \mu_{ji} + \mu_{b_j},\;
    \sum_i h_i^2 \sigma_{ji}^2 + \sigma_{b_j}^2\Big),

and for a convolution the same with the sums over each output position's patch: mean ``conv(h, mu) + mu_b``,
variance ``conv(h^2, sigma^2) + sigma_b^2``. Every row and position gets its own noise, which is what lowers the
gradient's variance; the marginal of each output is exactly that of weight draws, the correlations between rows are
dropped (the ELBO's expectation is unchanged, since its likelihood term sums over rows).
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


def _open(context: contextvars.ContextVar):
    """The value of one of this module's contexts open now, if any; none inside ``torch.compile`` (NUTS's compiled
    potential), which cannot trace a context variable and never runs inside one."""
    return None if torch.compiler.is_compiling() else context.get()


@contextlib.contextmanager
def recording() -> Iterator[dict[str, RecordedLayer]]:
    """Record every :func:`linear` and :func:`conv` call inside, keyed by its ``name``, in the dictionary yielded."""
    layers: dict[str, RecordedLayer] = {}
    token = _RECORDING.set(layers)
    try:
        yield layers
    finally:
        _RECORDING.reset(token)


@dataclass(frozen=True)
class LayerGaussian:
    """The independent Gaussians of one layer's weight and bias (locations and standard deviations, shaped as the
    weight and the bias without sample dimensions), for :func:`local_reparameterisation`."""

    weight_loc: torch.Tensor
    weight_scale: torch.Tensor
    bias_loc: torch.Tensor
    bias_scale: torch.Tensor


@dataclass
class _Reparameterisation:
    gaussians: Mapping[str, LayerGaussian]
    called: list[str]


_REPARAMETERISATION: contextvars.ContextVar[_Reparameterisation | None] = contextvars.ContextVar(
    "local_reparameterisation", default=None)


@contextlib.contextmanager
def local_reparameterisation(gaussians: Mapping[str, LayerGaussian]) -> Iterator[list[str]]:
    """Draw the output of every :func:`linear` or :func:`conv` call inside whose ``name`` is a key of ``gaussians``
    from its Gaussian (module notes); yield the list of the layer names called inside, in order.

    Raises
    ------
    ValueError
        From a layer of ``gaussians`` called twice in the context (its two outputs would get independent noise,
        although they share one weight draw).
    """
    state = _Reparameterisation(gaussians, [])
    token = _REPARAMETERISATION.set(state)
    try:
        yield state.called
    finally:
        _REPARAMETERISATION.reset(token)


def _layer_gaussian(name: str) -> LayerGaussian | None:
    """The Gaussian of layer ``name`` when a :func:`local_reparameterisation` holds one (the call noted)."""
    state = _open(_REPARAMETERISATION)
    if state is None:
        return None
    gaussian = state.gaussians.get(name)
    if gaussian is not None and name in state.called:
        raise ValueError(f"layer {name!r} was called twice in one forward pass; local reparameterisation draws each "
                         "call's output independently, so it needs each layer called once: use "
                         "local_reparameterisation=False")
    state.called.append(name)
    return gaussian


def _reparameterised(h: torch.Tensor, sample: torch.Size, gaussian: LayerGaussian, feature_dims: int,
                     apply: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """A draw of the layer's output ``(*sample, n, *out)``: ``apply(h, weight, bias)`` the unbatched layer on ``h``'s
    rows, ``feature_dims`` the dimensions of one row of ``h``."""
    mean = apply(h, gaussian.weight_loc, gaussian.bias_loc)
    # sd = s sqrt(apply((h / s)^2, W_scale^2, 0) + b_scale^2 / s^2), exact for any s > 0; s = max(1, max |h|) per row
    # keeps the squares of huge inputs (1e30) from overflowing
    s = h.detach().abs().amax(tuple(range(-feature_dims, 0)), keepdim=True).clamp_min(1.0)
    bias_variance = gaussian.bias_scale.reshape(-1, *(1,) * (feature_dims - 1)) ** 2
    variance = apply((h / s) ** 2, gaussian.weight_scale**2, torch.zeros_like(gaussian.bias_scale)) + bias_variance / s**2
    row = mean.shape[mean.dim() - feature_dims - 1:]
    return mean + s * variance.sqrt() * torch.randn(sample + row, dtype=mean.dtype, device=mean.device)


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
    """``h`` times the mask of layer ``name`` when :func:`input_masks` has one for it."""
    active = _open(_INPUT_MASKS)
    if active is None or name not in active[0]:
        return h
    masks, used = active
    used.add(name)
    return h * masks[name]


def _record(name: str, inputs: Callable[[], torch.Tensor], output: torch.Tensor, weight: torch.Tensor,
            bias: torch.Tensor, core_dims: int) -> torch.Tensor:
    """``output``, with a tap added and ``inputs()`` recorded under ``name`` when a recording is open (where a weight
    must have its ``core_dims`` dimensions alone, no sample dimensions)."""
    layers = _open(_RECORDING)
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
    gaussian = _layer_gaussian(name)
    if gaussian is not None:
        return _reparameterised(h, weight.shape[:-2], gaussian, 1, lambda rows, w, b: torch.matmul(rows, w.T) + b)
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
    convolve = F.conv1d if kernel_dims == 1 else F.conv2d
    sample = weight.shape[: -kernel_dims - 2]
    c_out, c_in, kernel = weight.shape[-kernel_dims - 2], weight.shape[-kernel_dims - 1], weight.shape[-kernel_dims:]
    channel_dim = h.dim() - kernel_dims - 1
    if channel_dim < 1 or h.shape[:channel_dim - 1] not in (torch.Size(), sample) or h.shape[channel_dim] != c_in:
        raise ValueError(f"layer {name!r}: h must be (*sample, n, {c_in}, *spatial) or (n, {c_in}, *spatial) for a "
                         f"weight of shape {tuple(weight.shape)}, got {tuple(h.shape)}")
    gaussian = _layer_gaussian(name)
    if gaussian is not None:
        def unbatched(rows: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            out = convolve(rows.flatten(0, channel_dim - 1), w, b, stride=stride, padding=padding)
            return out.reshape(*rows.shape[:channel_dim], *out.shape[1:])

        return _reparameterised(h, sample, gaussian, kernel_dims + 1, unbatched)
    draws = sample.numel()
    n, spatial = h.shape[channel_dim - 1], h.shape[channel_dim + 1 :]
    shared = h.expand(*sample, n, c_in, *spatial).reshape(draws, n, c_in, *spatial)
    stacked = shared.transpose(0, 1).reshape(n, draws * c_in, *spatial)  # the draws side by side as channel groups
    output = convolve(stacked, weight.reshape(draws * c_out, c_in, *kernel), bias.reshape(draws * c_out),
                      stride=stride, padding=padding, groups=draws)
    output = output.reshape(n, draws, c_out, *output.shape[2:]).transpose(0, 1).reshape(*sample, n, c_out,
                                                                                        *output.shape[2:])
    return _record(name, lambda: _patches(h, tuple(kernel), stride, padding), output, weight, bias,
                   core_dims=kernel_dims + 2)


def _probe_values(model) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {site.name: torch.randn(site.shape, generator=generator, dtype=torch.float64) for site in model.sites}


def layers_of_sites(model, layers: Mapping[str, RecordedLayer], values: Mapping[str, torch.Tensor]) -> list[str]:
    """The recorded layers whose weight and bias are the model's sites of those names (``{name}.weight`` and
    ``{name}.bias`` at ``values``), in the order of the sites."""
    def is_site(name: str, tensor: torch.Tensor) -> bool:
        return name in values and values[name].shape == tensor.shape and torch.equal(values[name], tensor)

    order = [site.name for site in model.sites]
    return sorted((name for name, layer in layers.items()
                   if is_site(f"{name}.weight", layer.weight) and is_site(f"{name}.bias", layer.bias)),
                  key=lambda name: order.index(f"{name}.weight"))


def sites_outside_layers(model, x: torch.Tensor) -> list[str]:
    """The weight sites of ``model`` that a forward pass on ``x``'s first row (at probe weights) does not use as the
    weight or bias of a :func:`linear` or :func:`conv` call of the site's group, in the order of the sites."""
    values = _probe_values(model)
    with torch.enable_grad(), recording() as layers:
        model.forward(x[:1].to(torch.float64), values)
    covered = {f"{name}.{kind}" for name in layers_of_sites(model, layers, values) for kind in ("weight", "bias")}
    return [site.name for site in model.sites if site.name not in covered]
