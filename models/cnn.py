r"""The Bayesian convolutional network, a small LeNet: convolution blocks, then a dense head.

The rows of ``x`` ``(n, in_features)`` are read as one-channel signals of ``input_shape`` (``(length,)`` or
``(height, width)``). Each block :math:`l = 0, \dots, B-1` convolves, activates and pools,

.. math::

    h_0 = x, \qquad h_{l+1} = \operatorname{pool}_p\big(\phi(h_l \star K_l + c_l)\big),
    \qquad K_l \in \mathbb{R}^{C_{l+1} \times C_l \times k \,(\times k)},

with :math:`C_0 = 1`, zero padding :math:`\lfloor k / 2 \rfloor` (the size is kept for an odd kernel) and pooling
windows of :math:`p` positions with stride :math:`p` (a remainder is dropped), each window's mean (``"avg"``) or its
largest value (``"max"``). The flattened
:math:`C_B \times` positions feed a dense head as in :class:`~bnn.models.mlp.BayesianMLP`:
:math:`g_{j+1} = \phi(g_j W_j^\top + b_j)`, no activation after the last layer. Every kernel, weight and bias has a
prior, and :math:`y_i \mid x_i, W \sim p(y_i \mid f(x_i; W))`.

Sample sites, in this order (the names are stable and part of the API):

================================  ===============================================================================
``features.{l}.weight``           the kernels of block ``l``, ``(C_out, C_in, k)`` or ``(C_out, C_in, k, k)``;
                                  fan-in :math:`C_\text{in} k^d`
``features.{l}.bias``             ``(C_out,)``
``classifier.{j}.weight``         dense layer ``j`` of the head, ``(d_out, d_in)`` (the ``nn.Linear`` layout)
``classifier.{j}.bias``           ``(d_out,)``
================================  ===============================================================================

:attr:`WeightSite.layer <bnn.models.sites.WeightSite.layer>` counts all layers, 0 for the first convolution, so the
final dense layer is :meth:`~bnn.models.network.BayesianNetwork.output_sites` (Laplace's last layer). The forward is
batched over leading sample dimensions of the weights (:mod:`bnn.models.layers`: one grouped convolution for all
draws), so the mean-field guide draws each convolution's outputs by local reparameterisation. It is not a chain of
dense layers (:meth:`~bnn.models.network.BayesianNetwork.dense_layers` is ``None``), so NUTS uses its torch potential.

**Dropout** (for MC dropout, :meth:`BayesianCNN.dropped_inputs`): after every block, channel dropout (spatial
dropout, Tompson et al. 2015; one Bernoulli mask per channel and example, shared by all the channel's positions, as
:func:`torch.nn.functional.dropout2d`), and ordinary dropout on the inputs of the head's later dense layers. A block's
output is the next layer's input, so dropping its channel :math:`c` is dropping input channel :math:`c` of
:math:`K_{l+1}` (or, after the last block, the columns of the head's first weight that read channel :math:`c`'s
positions): the masks are draws of the weights (:mod:`bnn.models.dropout`). The one-channel image is not dropped, so
the kernels :math:`K_0` are point estimates, as the biases are.

**The defaults are smooth** (SiLU, :math:`\phi(a) = a\,\mathrm{sigmoid}(a)`, and average pooling): the log joint is
then differentiable everywhere, so a MAP fit (and the Laplace approximation and ensemble built on it) can reach its
convergence test. ReLU units and max-pooling put kinks in it wherever a unit or a window's winner switches at a training
input, near which the polish's steps shrink toward zero and the test is not met (``activation="relu",
pooling="max"`` give the classic LeNet; the sampling and variational methods do not need a smooth log joint).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from bnn.models.activations import ACTIVATIONS, KINKED_ACTIVATIONS
from bnn.models.architecture_flags import CommandLine, Flag, hidden_flag, integer, positive_integers
from bnn.models.dropout import DroppedInputs
from bnn.models.layers import conv, linear
from bnn.models.likelihoods import Likelihood
from bnn.models.mlp import layer_sites
from bnn.models.network import ARCHITECTURES, BayesianNetwork
from bnn.models.priors import Prior
from bnn.models.sites import WeightSite

POOLINGS = {"avg": {1: F.avg_pool1d, 2: F.avg_pool2d}, "max": {1: F.max_pool1d, 2: F.max_pool2d}}
"""The pooling of each block by name, then by the number of spatial axes."""


def _sequence(name: str, value: Any, what: str) -> tuple[Any, ...]:
    """``value`` as a tuple if it is a sequence (a list, a tuple, an array), not a string or a single number; else
    ``ValueError`` naming the argument ``name`` and ``what`` it holds."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a sequence, {what}, got {value!r}")
    return tuple(value)


def _positive_integers(what: str, values: Sequence[Any]) -> tuple[int, ...]:
    """``values`` as Python ints if each is a positive integer (a Python or NumPy one, not a bool); else
    ``ValueError`` naming ``what``."""
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{what} must be positive integers, got {value!r}")
    return tuple(int(value) for value in values)


DEFAULT_CNN_PRIOR = {"name": "gaussian", "scale": 2.0, "fan_in_scaling": True}
r"""The CNN's default prior: a Gaussian of standard deviation :math:`2/\sqrt{\text{fan\_in}}` (``fan_in`` is
:math:`C_{in}` times the kernel's size for a convolution). Scaled by the fan-in, a prior draw keeps the activations'
scale through the blocks (with :math:`\mathcal{N}(0, 1)` the logits at a draw run to the hundreds); the factor 2 leaves
the smooth units room to bend, where :math:`1/\sqrt{\text{fan\_in}}` holds the MAP near the units' linear range."""


@ARCHITECTURES.register("cnn")
class BayesianCNN(BayesianNetwork):
    r"""A Bayesian LeNet: ``len(channels)`` blocks of convolution, activation and pooling, then dense layers.

    Parameters
    ----------
    in_features : int
        Columns of ``x``, the values of one signal or image.
    out_features : int
        Number of outputs: 1 for regression or binary, K for K-class classification.
    input_shape : sequence of int, optional
        ``(length,)`` for 1-D signals or ``(height, width)`` for images (one channel), whose product is
        ``in_features``; ``None`` reads each row as a signal of length ``in_features``.
    channels : sequence of int
        Output channels of each convolution block (one or more).
    kernel_size : int
        Kernel width along each spatial axis.
    pool : int
        Pooling window and stride along each axis; 1 pools nothing.
    pooling : {"avg", "max"}
        Each window's mean or its largest value (module notes: ``"max"`` puts kinks in the log joint).
    hidden : sequence of int
        Widths of the dense head's hidden layers; ``()`` puts the output layer straight after the blocks.
    activation : str
        Activation after every convolution and hidden dense layer, a name in
        :data:`bnn.models.activations.ACTIVATIONS` (module notes: a smooth one lets a MAP fit converge).
    prior, likelihood
        As :class:`~bnn.models.mlp.BayesianMLP`; a prior mapping may name a block (``"features.0"``) or a dense layer
        (``"classifier.1"``). The default prior is :data:`DEFAULT_CNN_PRIOR`, :math:`\mathcal{N}(0, 4/\text{fan\_in})`:
        with :math:`\mathcal{N}(0, 1)` on every weight the blocks make logits of hundreds at a prior draw, where
        the MAP fit starts, and its polish stalls far from a good fit.

    Raises
    ------
    ValueError
        For an unknown ``pooling`` or ``activation``, sizes that are not positive integers (NumPy integers are taken),
        a single number or a string where a sequence is meant, an ``input_shape`` of
        another product than ``in_features`` or of more than two axes, an empty ``channels``, or a kernel longer than
        the signal a block gets or a pooling window that leaves it no position; each message names the size to change.

    Examples
    --------
    >>> model = BayesianCNN(64, 10, input_shape=(8, 8), likelihood="categorical")   # doctest: +SKIP
    >>> [site.name for site in model.sites][:2]                                     # doctest: +SKIP
    ['features.0.weight', 'features.0.bias']
    """

    command_line = CommandLine(
        "convolution blocks then a dense head (BayesianCNN), reading a row as the data set's signal or image, or as a "
        "1-D signal over its columns when the data set has no input shape", (
            hidden_flag((32,), "the dense head's hidden layer"),
            Flag("activation", "silu", "the activation after every convolution and hidden dense layer",
                 choices=ACTIVATIONS),
            Flag("channels", (8, 16), "output channels of each convolution block, comma-separated",
                 lambda text: positive_integers(text, "--channels", "channel counts", "8,16")),
            Flag("kernel_size", 3, "convolution kernel width along each axis", integer("--kernel-size")),
            Flag("pool", 2, "pooling window and stride", integer("--pool")),
            Flag("pooling", "avg", "each pooling window's mean or largest value (max puts kinks in the log joint)",
                 choices=tuple(sorted(POOLINGS))),
        ), without_shape="each row is read as a 1-D signal over its {columns} columns")

    @classmethod
    def for_data(cls, in_features: int, out_features: int, input_shape: tuple[int, ...] | None, *,
                 prior: Mapping[str, Any], likelihood: Mapping[str, Any], **arguments: Any) -> BayesianCNN:
        """The CNN reading the data set's ``input_shape`` (each row as a 1-D signal without one); a Gaussian prior is
        :data:`DEFAULT_CNN_PRIOR`'s fan-in scaled one unless ``prior`` says otherwise."""
        if prior.get("name") == DEFAULT_CNN_PRIOR["name"]:
            prior = {**DEFAULT_CNN_PRIOR, **prior}
        return cls(in_features, out_features, input_shape=input_shape, **arguments, prior=prior, likelihood=likelihood)

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        input_shape: Sequence[int] | None = None,
        channels: Sequence[int] = (8, 16),
        kernel_size: int = 3,
        pool: int = 2,
        pooling: str = "avg",
        hidden: Sequence[int] = (32,),
        activation: str = "silu",
        prior: Prior | str | Mapping[str, Any] = DEFAULT_CNN_PRIOR,
        likelihood: Likelihood | str | Mapping[str, Any] = "gaussian",
    ) -> None:
        in_features, out_features = _positive_integers("in_features and out_features", (in_features, out_features))
        input_shape = ((in_features,) if input_shape is None else
                       _sequence("input_shape", input_shape, "(length,) or (height, width)"))
        channels = _sequence("channels", channels, "one entry per block like (8, 16)")
        hidden = _sequence("hidden", hidden, "one entry per hidden layer like (32,)")
        if len(input_shape) not in POOLINGS["max"]:
            raise ValueError(f"input_shape must be (length,) or (height, width), got {input_shape!r}")
        input_shape = _positive_integers("input_shape sizes", input_shape)
        if math.prod(input_shape) != in_features:
            raise ValueError(f"input_shape {input_shape} holds {math.prod(input_shape)} values but in_features is "
                             f"{in_features}: give an input_shape whose product is {in_features}")
        if not channels:
            raise ValueError("channels must name one convolution block or more, like (8, 16); use BayesianMLP for a "
                             "network without convolutions")
        channels = _positive_integers("channels", channels)
        kernel_size, pool = _positive_integers("kernel_size and pool", (kernel_size, pool))
        hidden = _positive_integers("hidden widths", hidden)
        self.input_shape = input_shape
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
        self.channels, self.kernel_size, self.pool, self.pooling, self.hidden = channels, kernel_size, pool, pooling, hidden
        self.activation = activation
        self._activation_fn = ACTIVATIONS.get(activation)
        self._block_shapes = self._spatial_shapes()
        super().__init__(in_features, out_features, self._weight_sites(out_features), prior=prior, likelihood=likelihood)

    @property
    def padding(self) -> int:
        """Zero padding on each side of every convolution, :math:`\\lfloor k / 2 \\rfloor`."""
        return self.kernel_size // 2

    def _spatial_shapes(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """The spatial shape after each block's convolution and after its pooling; ``ValueError`` when one is empty."""
        shapes, shape = [], self.input_shape
        for block in range(len(self.channels)):
            if self.kernel_size > min(shape):
                raise ValueError(f"block {block} gets a signal of shape {shape}, shorter than its kernel of "
                                 f"{self.kernel_size}; use kernel_size <= {min(shape)}, or fewer channels (blocks)")
            convolved = tuple(size + 2 * self.padding - self.kernel_size + 1 for size in shape)
            pooled = tuple(size // self.pool for size in convolved)
            if min(pooled) < 1:
                raise ValueError(f"block {block} gets a signal of shape {shape}: a kernel of {self.kernel_size} (padding "
                                 f"{self.padding}) then pooling by {self.pool} leave {pooled}, no position; use a "
                                 "smaller kernel_size or pool, or fewer channels (blocks)")
            shapes.append((convolved, pooled))
            shape = pooled
        return tuple(shapes)

    def _weight_sites(self, out_features: int) -> tuple[WeightSite, ...]:
        """Kernel then bias of each block, then weight then bias of each dense layer, from the inputs to the outputs."""
        kernel = (self.kernel_size,) * len(self.input_shape)
        c_in = (1, *self.channels)
        features = tuple(
            WeightSite(f"features.{block}.{kind}", block, torch.Size(shape), c_in[block] * math.prod(kernel))
            for block, c_out in enumerate(self.channels)
            for kind, shape in (("weight", (c_out, c_in[block], *kernel)), ("bias", (c_out,)))
        )
        flat = self.channels[-1] * math.prod(self._block_shapes[-1][1])
        head = layer_sites((flat, *self.hidden, out_features), group="classifier")
        return features + tuple(dataclasses.replace(site, layer=site.layer + len(self.channels)) for site in head)

    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Network output :math:`f(x; W)` of shape ``(*sample, n, out_features)``; ``weights`` maps each site name to
        a tensor of shape ``(*sample, *site.shape)``."""
        if x.dim() != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape (n, {self.in_features}), got {tuple(x.shape)}")
        h = x.reshape(x.shape[0], 1, *self.input_shape)
        pool = POOLINGS[self.pooling][len(self.input_shape)]
        for block in range(len(self.channels)):
            group = f"features.{block}"
            h = self._activation_fn(conv(h, weights[f"{group}.weight"], weights[f"{group}.bias"], name=group,
                                         padding=self.padding))
            lead, stage = h.shape[: h.dim() - len(self.input_shape) - 1], h.shape[h.dim() - len(self.input_shape) - 1:]
            pooled = pool(h.reshape(-1, *stage), self.pool)  # (prod(*sample, n), C_out, *positions)
            h = pooled.reshape(*lead, *pooled.shape[1:])
        h = h.flatten(start_dim=h.dim() - len(self.input_shape) - 1)
        dense = self.sites[2 * len(self.channels):]
        for weight_site, bias_site in zip(dense[::2], dense[1::2]):
            h = linear(h, weights[weight_site.name], weights[bias_site.name], name=weight_site.group)
            if bias_site is not self.sites[-1]:
                h = self._activation_fn(h)
        return h

    def dropped_inputs(self) -> tuple[DroppedInputs, ...]:
        """Channel dropout after every block, unit dropout in the dense head (module notes): the channels of the inputs
        of blocks 1 to B-1 and of the head's first layer (which reads each channel's pooled positions flattened), and
        the units of the inputs of the head's later layers. The image itself is not dropped (its one channel is all of
        it), so the kernels of block 0 are not either."""
        blocks = len(self.channels)
        features = tuple(DroppedInputs(self.sites[2 * block], self.channels[block - 1]) for block in range(1, blocks))
        head = self.sites[2 * blocks::2]
        return (*features, DroppedInputs(head[0], self.channels[-1]),
                *(DroppedInputs(weight, weight.shape[1]) for weight in head[1:]))

    def has_kinks(self) -> bool:
        """A kinked activation (:data:`~bnn.models.activations.KINKED_ACTIVATIONS`) or max-pooling (module notes)."""
        return self.activation in KINKED_ACTIVATIONS or self.pooling == "max"

    def activation_widths(self) -> tuple[int, ...]:
        """The values one row makes at each stage: its inputs, each block's convolution and pooling (channels times
        positions), each dense layer's units."""
        blocks = tuple(c * math.prod(shape) for c, shapes in zip(self.channels, self._block_shapes) for shape in shapes)
        return (self.in_features, *blocks, *self.hidden, self.out_features)

    def arguments(self) -> dict[str, Any]:
        return {"in_features": self.in_features, "out_features": self.out_features, "input_shape": list(self.input_shape),
                "channels": list(self.channels), "kernel_size": self.kernel_size, "pool": self.pool,
                "pooling": self.pooling,
                "hidden": list(self.hidden), "activation": self.activation}
