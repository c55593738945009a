"""MC dropout: a network trained with dropout, its masks as draws of the weights (:func:`fit_mc_dropout`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import POINT_ESTIMATE
from bnn.inference.core.method import Method
from bnn.inference.core.model_requirement import DROPPED_INPUTS
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.mc_dropout.cost import COST
from bnn.inference.mc_dropout.fit import (
    IncompleteTrainingWarning,
    draw_masks,
    dropout_forward,
    expected_log_prior,
    masked_weights,
    run_mc_dropout,
)
from bnn.inference.mc_dropout.options import MCDropoutOptions
from bnn.inference.mc_dropout.record import MCDropoutRecord
from bnn.inference.mc_dropout.uci_protocol import PAPER_OPTIONS, SELECTION, paper_epochs, paper_grid, paper_model

METHOD = Method(
    "mc-dropout", MCDropoutOptions, run_mc_dropout, MCDropoutRecord, requires=DROPPED_INPUTS, cost=COST,
    refuses_hierarchical=POINT_ESTIMATE, budget_floors={"steps": 500},
    uci=UCIProtocol(options=PAPER_OPTIONS, selection=SELECTION, validation=paper_grid, folder_options=paper_epochs,
                    model_settings=paper_model, reproduces="MC dropout"),
)


def fit_mc_dropout(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """MC dropout on ``(x, y)`` with the options of :class:`MCDropoutOptions` (validated first)."""
    return METHOD(model, x, y, **options)


__all__ = ["METHOD", "IncompleteTrainingWarning", "MCDropoutOptions", "MCDropoutRecord", "draw_masks", "dropout_forward",
           "expected_log_prior", "fit_mc_dropout", "masked_weights", "run_mc_dropout"]
