"""Stein variational gradient descent (Liu and Wang 2016): interacting particles moved towards the posterior by Pyro's
``SVGD`` (:func:`fit_svgd`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import for_hierarchical
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.svgd.cost import COST
from bnn.inference.svgd.fit import run_svgd
from bnn.inference.svgd.options import SVGDOptions
from bnn.inference.svgd.record import SVGDRecord

METHOD = Method(
    "svgd", SVGDOptions, run_svgd, SVGDRecord, cost=COST, budget_floors={"steps": 300},
    model_defaults=for_hierarchical({"kernel": "imq"}),
    advice="raise --steps, or lower --lr.",
    uci=UCIProtocol(selection="fixed: the defaults, prior N(0, 1), the noise a particle coordinate"),
)


def fit_svgd(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SVGD on ``(x, y)`` with the options of :class:`SVGDOptions` (validated first)."""
    return METHOD(model, x, y, **options)


__all__ = ["METHOD", "SVGDOptions", "SVGDRecord", "fit_svgd", "run_svgd"]
