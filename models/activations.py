"""Hidden-layer activations of the networks, by name."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from bnn.registry import Registry

ACTIVATIONS: Registry[Callable[[torch.Tensor], torch.Tensor]] = Registry("activation")
ACTIVATIONS.register("tanh", torch.tanh)
ACTIVATIONS.register("relu", torch.relu)
ACTIVATIONS.register("sigmoid", torch.sigmoid)
ACTIVATIONS.register("gelu", F.gelu)
ACTIVATIONS.register("elu", F.elu)
ACTIVATIONS.register("silu", F.silu)
ACTIVATIONS.register("softplus", F.softplus)

KINKED_ACTIVATIONS = frozenset({"relu"})
"""The activations, of those registered, whose networks are only piecewise smooth in their weights."""
