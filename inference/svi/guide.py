r"""The guide an SVI fit starts from: built from the options, with ``init_loc="map"`` resolved here.

A guide is built before it has seen any data, so a start at the MAP weights

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

is fitted here, on the full training data (whatever the batch size), and handed to the
guide as a mapping of site values (:func:`~bnn.inference.posterior_mode.map_estimate.map_weights`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from bnn.guides.registry import build_guide
from bnn.inference.posterior_mode.map_estimate import map_weights
from bnn.inference.svi.options import SVIOptions

MAP_START = "map"
"""The ``init_loc`` that asks SVI to start the guide at the MAP weights."""


def starting_guide_options(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> dict[str, Any]:
    """``options.guide_options`` with ``init_loc="map"`` replaced by the MAP value of every latent site.

    The MAP is fitted on the full ``(x, y)`` from torch's global random state, so under the fit's
    seed it is the same for every run of the fit. A resumed fit takes its parameters from the
    checkpoint, so it starts the guide at ``"prior"`` instead of fitting the MAP again.

    Returns
    -------
    dict of str to object
        The keyword options the guide is built with (a new dict; ``options`` is unchanged).
    """
    guide_options = dict(options.guide_options or {})
    init_loc = guide_options.get("init_loc")
    if isinstance(init_loc, str) and init_loc == MAP_START:
        guide_options["init_loc"] = "prior" if options.resume is not None else map_weights(model, x, y)
    return guide_options


def build_svi_guide(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> tuple[Callable, str]:
    """The guide ``options.guide`` of ``model`` with :func:`starting_guide_options`, and its name for reports.

    See :func:`bnn.guides.registry.build_guide` for what ``options.guide`` may be.
    """
    return build_guide(options.guide, model, **starting_guide_options(model, x, y, options))
