r"""All weight sites of a network as one flat vector :math:`\theta \in \mathbb{R}^D`.

The sites are concatenated in the model's order (``layers.0.weight``, ``layers.0.bias``,
..., ``layers.{L}.weight``, ``layers.{L}.bias``), each flattened row-major, so the last
layer's weights and bias are the trailing entries of :math:`\theta`. Leading sample
dimensions are carried through both ways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from bnn.models.sites import WeightSite


def num_weights(sites: Sequence[WeightSite]) -> int:
    """:math:`D`, the number of scalar weights over ``sites``."""
    return sum(site.numel for site in sites)


def split_flat(sites: Sequence[WeightSite], flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """Cut ``flat`` of shape ``(*sample, D)`` into ``{site.name: (*sample, *site.shape)}``."""
    if flat.shape[-1] != num_weights(sites):
        raise ValueError(f"a flat weight vector for these sites has {num_weights(sites)} entries, got {flat.shape[-1]}")
    pieces = torch.split(flat, [site.numel for site in sites], dim=-1)
    return {site.name: piece.reshape((*flat.shape[:-1], *site.shape)) for site, piece in zip(sites, pieces)}


def join_sites(sites: Sequence[WeightSite], values: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Inverse of :func:`split_flat`: ``(*sample, *site.shape)`` tensors to ``(*sample, D)``."""
    pieces = []
    for site in sites:
        value = values[site.name]
        pieces.append(value.reshape(*value.shape[: value.dim() - len(site.shape)], site.numel))
    return torch.cat(pieces, dim=-1)
