"""Joint draws of a model's latent sites from a guide, the way SVI and Laplace fill their :class:`Posterior`."""

from __future__ import annotations

import pyro
import torch
from bnn.models.network import MAX_PLATE_NESTING
from pyro import poutine


def sample_guide(guide, num_samples: int, shapes: dict[str, torch.Size], *args, **kwargs) -> dict[str, torch.Tensor]:
    """``num_samples`` joint draws of the latent sites from ``guide``, shaped ``(num_samples, *site_shape)``.

    The draws are vectorised: one run of the guide under a plate of size ``num_samples`` left of the model's plates.
    """
    with torch.no_grad(), pyro.plate("_draws", num_samples, dim=-MAX_PLATE_NESTING - 1):
        trace = poutine.trace(guide).get_trace(*args, **kwargs)
    return {name: trace.nodes[name]["value"].reshape(num_samples, *shape) for name, shape in shapes.items()}
