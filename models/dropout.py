r"""Where a network's dropout goes: the layers whose inputs MC dropout masks, and by which units.

Dropout on the inputs of a layer multiplies each input unit :math:`u` by a mask
:math:`z_u \sim \text{Bernoulli}(1 - p) / (1 - p)` (inverted dropout: a kept unit is scaled by :math:`1/(1-p)`). A unit
is one input of a dense layer (Srivastava et al. 2014), or one whole channel of a convolution's input, all its
positions sharing the mask (spatial dropout, Tompson et al. 2015; :func:`torch.nn.functional.dropout1d` and
``dropout2d``); a channel that reaches a dense layer flattened covers the ``positions`` consecutive inputs it was
flattened into.

Because a layer is linear in its input, masking input unit :math:`u` is masking the slice of the layer's weight
that reads it: column block :math:`u` of a dense weight :math:`W \in \mathbb{R}^{d_\text{out} \times d_\text{in}}`,
input channel :math:`u` of a kernel :math:`K \in \mathbb{R}^{C_\text{out} \times C_\text{in} \times k \,(\times k)}`
(zero padding reads zeros either way). So one set of masks shared by every input is a draw of the weights,

.. math::

    W^{(s)}_{:, u} = W_{:, u}\, z^{(s)}_u,

which is how MC dropout stores its draws (:mod:`bnn.inference.mc_dropout.fit`); training draws a fresh set of masks
for each example instead, applied to the layer's input (:func:`bnn.models.layers.input_masks`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.models.sites import WeightSite


@dataclass(frozen=True)
class DroppedInputs:
    """Dropout on the inputs of one layer, by ``units`` masks per example.

    Attributes
    ----------
    weight : WeightSite
        The layer's weight, ``(d_out, d_in)`` or ``(C_out, C_in, *kernel)``: its dimension 1 indexes the layer's
        inputs, and the layer is called under the name ``weight.group``
        (:func:`~bnn.models.layers.linear` or :func:`~bnn.models.layers.conv`).
    units : int
        The masks per example: ``d_in`` for unit dropout on a dense layer, ``C_in`` for channel dropout on a
        convolution, or the channels that a dense layer reads flattened (each covering :attr:`positions` inputs).

    Raises
    ------
    ValueError
        For a weight of fewer than two dimensions, or ``units`` that do not divide its inputs.
    """

    weight: WeightSite
    units: int

    def __post_init__(self) -> None:
        if len(self.weight.shape) < 2:
            raise ValueError(f"dropout on the inputs of {self.weight.name!r} needs a weight of two or more dimensions "
                             f"(outputs, inputs, ...), got shape {tuple(self.weight.shape)}")
        inputs = self.weight.shape[1]
        if isinstance(self.units, bool) or not isinstance(self.units, int) or self.units < 1 or inputs % self.units:
            raise ValueError(f"dropout on the inputs of {self.weight.name!r} needs units that divide its {inputs} inputs "
                             f"(each unit covering as many consecutive inputs), got {self.units!r}")

    @property
    def positions(self) -> int:
        """The consecutive inputs of the layer (dimension 1 of its weight) that one unit covers."""
        return self.weight.shape[1] // self.units

    def _expanded(self, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` ``(*lead, units)`` repeated over each unit's positions, ``(*lead, d_in, 1, ...)``, with one singleton
        dimension per kernel dimension of the weight."""
        if mask.shape[-1:] != (self.units,):
            raise ValueError(f"a dropout mask of {self.weight.group!r} must end in its {self.units} units, got shape "
                             f"{tuple(mask.shape)}")
        inputs = mask.repeat_interleave(self.positions, dim=-1) if self.positions > 1 else mask
        return inputs.reshape(*inputs.shape, *(1,) * (len(self.weight.shape) - 2))

    def input_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The mask of the layer's input ``(..., n, d_in, *spatial)`` from unit masks ``(..., n, units)`` (one per
        example) or ``(S, 1, units)`` (one per draw, shared by the examples)."""
        return self._expanded(mask)

    def weight_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The mask of the weight ``(*lead, *weight.shape)`` from unit masks ``(*lead, units)``: one draw of the weights
        per set of masks (module notes)."""
        return self._expanded(mask).unsqueeze(-len(self.weight.shape))
