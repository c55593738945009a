"""The checks every fit makes of its model and data before any work: the model states the model interface and lives
on the CPU, and the data suit it."""

from __future__ import annotations

import torch
from bnn.datasets.validation import check_inputs_targets
from bnn.models.network import check_network


def check_model(model) -> None:
    """Refuse what is not a :class:`~bnn.models.network.BayesianNetwork` (``TypeError``), and a model whose prior or
    likelihood holds a tensor that is not on the CPU (``ValueError``), before any work."""
    check_network(model)
    for part in (*model.prior.values(), model.likelihood):
        for name, value in vars(part).items():
            if isinstance(value, torch.Tensor) and value.device.type != "cpu":
                raise ValueError(f"the model's {type(part).__name__} holds {name} on the {value.device.type!r} device; "
                                 f"build it from CPU tensors (for example {name}.cpu()) and choose where the fit "
                                 "computes with device='cuda'")


def checked_data(model, x, y) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` checked for ``model`` (:func:`check_model` first): finite floating-point inputs of shape
    ``(n, model.in_features)``, two rows or more, and targets the likelihood accepts, in the dtypes the fit computes
    in; a regression target must vary (a constant one leaves nothing to learn, and a learned noise collapses to 0)."""
    check_model(model)
    x, y = check_inputs_targets(x, y)
    if x.shape[1] != model.in_features:
        raise ValueError(f"the model reads {model.in_features} input features but x has {x.shape[1]}")
    if x.shape[0] < 2:
        raise ValueError("the data has a single training row: a fit learns nothing from it (and the checks, LOO and the "
                         "validation splits need more); give two rows or more")
    y = model.likelihood.check_targets(y, model.out_features)
    if model.likelihood.task == "regression" and bool((y == y[0]).all()):
        raise ValueError(f"the regression target is constant ({y.flatten()[0].item():g} in every training row): nothing "
                         "to learn, and a learned noise scale would collapse to 0; check the target column")
    return x, y
