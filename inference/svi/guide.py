r"""The guide an SVI fit starts from: built from the options, with ``init_loc="map"`` resolved here.

A guide is built before it has seen any data, so a start at the MAP weights

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

is fitted here, on the full training data (whatever the batch size), and handed to the
guide as a mapping of site values (:func:`~bnn.inference.map_search.map_estimate.map_weights`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from bnn.guides import GUIDES
from bnn.guides.registry import build_guide
from bnn.inference.core.hierarchical_refusal import HIERARCHICAL_METHODS, hierarchical_priors_named
from bnn.inference.map_search.map_estimate import map_weights
from bnn.inference.svi.options import SVIOptions
from pyro.infer.autoguide import AutoDelta

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


HIERARCHICAL_GUIDES = ("autonormal", "meanfield", "full", "lowrank", "flow")
"""The registered guides that cover the latent scales of hierarchical priors: every latent site of the program, the
scales log-normal (mean-field in their unconstrained, log, space) and the standardised weights Gaussian (Pyro's
AutoNormal, and Bayes by Backprop, :mod:`bnn.guides.flat_normal`), or every latent jointly in that space
(:mod:`bnn.guides.correlated`)."""


def check_hierarchical_guide(model, options: SVIOptions) -> None:
    """Refuse (``ValueError``), before any work, a guide that cannot cover the latent scales of ``model``'s
    hierarchical priors: a registered guide other than those of :data:`HIERARCHICAL_GUIDES` (the empirical-Bayes guide
    learns each weight's prior variance itself), an ``AutoDelta`` (a point estimate of the scales collapses them to
    zero), or ``init_loc="map"`` (a joint MAP does the same). A ready guide callable, an unregistered factory or
    another ``AutoGuide`` class is the user's to vouch for."""
    if not model.hierarchical_sites:
        return
    spec = options.guide
    named = spec if isinstance(spec, str) else GUIDES.name_of(spec)  # None: a guide of the user's own
    if isinstance(spec, type) and issubclass(spec, AutoDelta):
        why = "its guide AutoDelta is a point estimate, and a joint MAP over weights and scales collapses the scales to zero"
    elif named is not None and named not in HIERARCHICAL_GUIDES:
        why = (f"its guide {named!r} does not cover their latent scales (the guides that do: "
               f"{', '.join(map(repr, HIERARCHICAL_GUIDES))})")
    elif (options.guide_options or {}).get("init_loc") == MAP_START:
        why = "init_loc='map' starts from a joint MAP over weights and scales, which collapses the scales to zero"
    else:
        return
    raise ValueError(f"method 'svi' cannot fit the hierarchical prior(s) {hierarchical_priors_named(model)} of "
                     f"{type(model).__name__}: {why}; use {HIERARCHICAL_METHODS}")


def build_svi_guide(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> tuple[Callable, str]:
    """The guide ``options.guide`` of ``model`` with :func:`starting_guide_options`, and its name for reports.

    See :func:`bnn.guides.registry.build_guide` for what ``options.guide`` may be.
    """
    return build_guide(options.guide, model, **starting_guide_options(model, x, y, options))
