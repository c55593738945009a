"""The single entry point: ``fit(model, data, method=...) -> Posterior``.

Methods live in :data:`METHODS`; each is a function ``(model, x, y, **options) ->
Posterior`` with keyword-only options. ``fit`` validates the data against the model
and the options against the method before any work starts.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from bnn.datasets.dataset import Dataset
from bnn.datasets.validation import check_inputs_targets
from bnn.inference.laplace.fit import fit_laplace
from bnn.inference.nuts.fit import fit_nuts
from bnn.inference.posterior import Posterior
from bnn.inference.svi.fit import fit_svi

from bnn.registry import Registry

METHODS: Registry = Registry("method")
METHODS.register("svi", fit_svi)
METHODS.register("nuts", fit_nuts)
METHODS.register("laplace", fit_laplace)


def prepare_data(model, data) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ``data`` (a :class:`Dataset` or ``(x, y)``) for ``model``; return training tensors."""
    if isinstance(data, Dataset):
        x, y = data.x_train, data.y_train
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = data
    else:
        raise ValueError(f"data must be a Dataset or a pair (x, y), got {type(data).__name__}")
    x, y = check_inputs_targets(x, y)
    if x.shape[1] != model.in_features:
        raise ValueError(f"the model reads {model.in_features} input features but x has {x.shape[1]}")
    return x, model.likelihood.check_targets(y, model.out_features)


def keyword_options(function) -> list[str]:
    """The keyword-only options of a method function."""
    return [name for name, p in inspect.signature(function).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]


def check_options(method: str, function, options: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming any option ``function`` does not take."""
    accepted = set(keyword_options(function))
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(f"method {method!r} takes no option(s) {unknown}; it takes {sorted(accepted)}")


def fit(model, data, method: str = "svi", **options: Any) -> Posterior:
    """Fit ``model`` to ``data`` with inference ``method`` and return the :class:`Posterior`.

    Parameters
    ----------
    model : BayesianMLP
        The Pyro model.
    data : Dataset or (x, y)
        Training data; a :class:`~bnn.datasets.Dataset` also names the run in reports.
    method : str
        A name in :data:`METHODS`.
    **options
        The method's options, for example ``guide``, ``steps``, ``lr`` and ``seed`` for SVI
        (see :func:`bnn.inference.svi.fit.fit_svi`).

    Raises
    ------
    ValueError
        For bad data, an unknown method or option, before any work starts.
    """
    function = METHODS.get(method)
    check_options(method, function, options)
    x, y = prepare_data(model, data)
    posterior = function(model, x, y, **options)
    if isinstance(data, Dataset):
        posterior.info["dataset"] = data.name
    return posterior
