r"""A network computed at many weight draws a batch of draws at a time, so that its activations stay bounded.

A network of weight draws :math:`W_1, \dots, W_S` at :math:`n` input rows holds :math:`S\,n\,w` activations in its
widest layer of :math:`w` values per row (:meth:`~bnn.models.network.BayesianNetwork.activation_widths`): for a
thousand draws of a small CNN at a few hundred rows, gigabytes. :func:`draw_batches` yields the draws in batches of
:math:`\max(1, \lfloor V / (n\,w) \rfloor)` for :math:`V` = :data:`VALUES_PER_BATCH`, in order, so that memory
stays bounded however many draws and rows there are.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

VALUES_PER_BATCH = 2**24
"""The most network activations (draws x rows x width) computed at once: 64 MiB in float32."""


def draw_batches(model, rows: int, values: dict[str, torch.Tensor]) -> Iterator[dict[str, torch.Tensor]]:
    """``values`` (draws first, ``(S, *site_shape)`` per site) a batch of draws at a time, in order, each batch of
    ``model`` at ``rows`` input rows holding at most :data:`VALUES_PER_BATCH` activations (module notes)."""
    total = next(iter(values.values())).shape[0]
    per_batch = max(1, VALUES_PER_BATCH // max(1, rows * max(model.activation_widths())))
    for start in range(0, total, per_batch):
        yield {name: value[start:start + per_batch] for name, value in values.items()}
