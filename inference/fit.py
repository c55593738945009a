"""The single entry point: ``fit(model, data, method=...) -> Posterior``.

Methods live in :data:`METHODS`, one :class:`~bnn.inference.core.method.Method` per subpackage (``svi``, ``nuts``,
``laplace``, ``map``, ``mc_dropout``, ``ensemble``, and ``sgmcmc`` with two): a name, a typed option set and a run function.
``fit`` validates the data against the model and the options against the method before any work starts.
"""

from __future__ import annotations

from typing import Any

import torch
from bnn.datasets.dataset import Dataset
from bnn.datasets.validation import check_inputs_targets
from bnn.inference import ensemble, laplace, map, mc_dropout, nuts, sgmcmc, svi
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.models import BayesianMLP

from bnn.registry import Registry

METHODS: Registry = Registry("method")
for _package in (svi, nuts, laplace, map, mc_dropout, ensemble):
    METHODS.register(_package.METHOD.name, _package.METHOD)
METHODS.register(sgmcmc.SGLD.name, sgmcmc.SGLD)
METHODS.register(sgmcmc.SGHMC.name, sgmcmc.SGHMC)


def check_model(model) -> None:
    """Refuse what is not a :class:`~bnn.models.BayesianMLP` (``TypeError``), and a model whose prior or likelihood
    holds a tensor that is not on the CPU (``ValueError``), before any work."""
    if not isinstance(model, BayesianMLP):
        raise TypeError(f"model must be a BayesianMLP (from bnn.models), got {type(model).__name__}: build one with "
                        "BayesianMLP(in_features, out_features, hidden=...)")
    for part in (*model.prior.values(), model.likelihood):
        for name, value in vars(part).items():
            if isinstance(value, torch.Tensor) and value.device.type != "cpu":
                raise ValueError(f"the model's {type(part).__name__} holds {name} on the {value.device.type!r} device; "
                                 "the collection runs on the CPU (there is no device option yet): build it from CPU "
                                 f"tensors, for example {name}.cpu()")


def prepare_data(model, data) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ``data`` (a :class:`Dataset` or ``(x, y)``) for ``model``; return training tensors."""
    check_model(model)
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
        The method's options, the fields of its option set: :class:`~bnn.inference.svi.SVIOptions`,
        :class:`~bnn.inference.nuts.NUTSOptions`, :class:`~bnn.inference.laplace.LaplaceOptions`,
        :class:`~bnn.inference.map.MapOptions`, :class:`~bnn.inference.mc_dropout.MCDropoutOptions`,
        :class:`~bnn.inference.ensemble.EnsembleOptions`,
        :class:`~bnn.inference.sgmcmc.SGLDOptions` or :class:`~bnn.inference.sgmcmc.SGHMCOptions`.

    Returns
    -------
    Posterior
        Its ``model`` is a copy of ``model`` taken when the fit started
        (:func:`~bnn.inference.core.model_snapshot.snapshot_model`): changing ``model`` afterwards
        (``model.prior = "laplace"``) changes neither this posterior nor what it saves.

    Raises
    ------
    TypeError
        For a ``model`` that is not a :class:`~bnn.models.BayesianMLP`, before any work starts.
    ValueError
        For bad data, data or a model not on the CPU, an unknown method or option, a fit that needs more memory
        than the machine has available (:mod:`bnn.runtime.memory`), or a model that cannot be copied, before any
        work starts.
    """
    chosen: Method = METHODS.get(method)
    x, y = prepare_data(model, data)
    posterior = chosen(model, x, y, **options)
    if isinstance(data, Dataset):
        posterior.record.dataset = data.name
    return posterior
