r"""Dense and convolution layers batched over leading sample dimensions of their weights.

A Bayesian network evaluates many weight draws at once: each weight carries leading sample dimensions
``(*sample, *shape)``, and so does the result. The two layers here are written with torch operations that broadcast
(``matmul``) or group (one grouped convolution over all draws), with no Python loop over draws, so that vectorised
ELBOs, ``Predictive(parallel=True)`` and ``torch.func`` (``vmap``/``jacrev``) work through them. ``name`` is the
layer's group (``"features.0"``), unused here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_CONVOLUTIONS = {1: F.conv1d, 2: F.conv2d}


def linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, name: str) -> torch.Tensor:
    r"""The dense layer :math:`h W^\top + b`, for every draw of the weights.

    Parameters
    ----------
    h : torch.Tensor
        ``(*sample, n, d_in)``, or ``(n, d_in)`` shared by every draw.
    weight : torch.Tensor
        ``(*sample, d_out, d_in)``.
    bias : torch.Tensor
        ``(*sample, d_out)``.
    name : str
        The layer's group, unused.

    Returns
    -------
    torch.Tensor
        ``(*sample, n, d_out)``.
    """
    return torch.matmul(h, weight.transpose(-1, -2)) + bias.unsqueeze(-2)


def conv(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *, name: str, stride: int = 1,
         padding: int = 0) -> torch.Tensor:
    r"""The convolution :math:`h \star W + b` (cross-correlation, as ``torch.nn.functional.conv1d``/``conv2d``) for
    every draw of the weights, as one grouped convolution: the draws' channels are stacked, ``S * C_in`` in and
    ``S * C_out`` out in ``S`` groups, so draw :math:`s` reads its own input channels with its own kernels.

    Parameters
    ----------
    h : torch.Tensor
        ``(*sample, n, C_in, *spatial)``, or ``(n, C_in, *spatial)`` shared by every draw.
    weight : torch.Tensor
        ``(*sample, C_out, C_in, *kernel)`` with one or two kernel dimensions.
    bias : torch.Tensor
        ``(*sample, C_out)``.
    name : str
        The layer's group, unused.
    stride, padding : int
        As ``torch.nn.functional.conv1d``/``conv2d`` (zero padding on every side).

    Returns
    -------
    torch.Tensor
        ``(*sample, n, C_out, *spatial_out)``, with :math:`\lfloor (L + 2p - k) / s \rfloor + 1` positions along an
        axis of length :math:`L`, kernel :math:`k`, padding :math:`p` and stride :math:`s`.
    """
    sample = bias.shape[:-1]
    spatial_dims = weight.dim() - len(sample) - 2
    if spatial_dims not in _CONVOLUTIONS:
        raise ValueError(f"conv takes a weight (*sample, C_out, C_in, *kernel) with 1 or 2 kernel dimensions and a bias "
                         f"(*sample, C_out), got shapes {tuple(weight.shape)} and {tuple(bias.shape)}")
    draws = math.prod(sample)
    c_out, c_in, *kernel = weight.shape[len(sample):]
    h = h.expand(*sample, *h.shape[h.dim() - spatial_dims - 2:])  # (*sample, n, C_in, *spatial)
    n, spatial = h.shape[len(sample)], h.shape[h.dim() - spatial_dims:]
    stacked = h.reshape(draws, n, c_in, *spatial).transpose(0, 1).reshape(n, draws * c_in, *spatial)
    out = _CONVOLUTIONS[spatial_dims](stacked, weight.reshape(draws * c_out, c_in, *kernel), bias.reshape(draws * c_out),
                                      stride=stride, padding=padding, groups=draws)
    spatial_out = out.shape[2:]
    return out.reshape(n, draws, c_out, *spatial_out).transpose(0, 1).reshape(*sample, n, c_out, *spatial_out)
