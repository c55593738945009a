"""Descriptions of a network's weight sites, the unit that priors and guides work on."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class WeightSite:
    """One weight or bias tensor of a network, as a Pyro sample site.

    Attributes
    ----------
    name : str
        The Pyro site name, ``<group>.weight`` or ``<group>.bias`` with the group ``layers.{layer}``
        (or ``heads.{task}`` for the output heads of :class:`~bnn.models.multihead.MultiHeadMLP`).
    layer : int
        Index of the layer, 0 for the layer that reads the inputs.
    shape : torch.Size
        ``(out_features, in_features)`` for a weight (the ``nn.Linear`` layout),
        ``(out_features,)`` for a bias.
    fan_in : int
        Number of inputs of the layer (used by fan-in scaled priors).
    """

    name: str
    layer: int
    shape: torch.Size
    fan_in: int

    @property
    def numel(self) -> int:
        """Number of scalar weights in the site."""
        return self.shape.numel()

    @property
    def group(self) -> str:
        """The layer (or head) the site belongs to, its name without ``.weight``/``.bias``: ``layers.1``."""
        return self.name.rsplit(".", 1)[0]
