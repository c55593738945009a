"""The single entry point: ``fit(model, data, method=...) -> Posterior``.

Methods live in :data:`METHODS`, one :class:`~bnn.inference.core.method.Method` each, registered by the subpackage
that defines it (``METHOD``, or ``METHODS`` for a package of several): a name, a typed option set and a run function.
``fit`` validates the data against the model and the options against the method before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from bnn.datasets.dataset import Dataset
from bnn.inference import ensemble, ivon, laplace, mc_dropout, nuts, point_estimate, sgmcmc, svgd, svi, swag
from bnn.inference.core.loader_data import batch_options, is_loader, read_loader, with_loader_batches
from bnn.inference.core.method import METHODS, Method, register_method
from bnn.inference.core.model_data import check_model, checked_data
from bnn.inference.core.point_parameters import fit_point_parameters, needs_point_fit
from bnn.inference.core.posterior import Posterior

for _method in (svi.METHOD, nuts.METHOD, laplace.METHOD, point_estimate.METHOD, mc_dropout.METHOD, ensemble.METHOD,
                sgmcmc.SGLD, sgmcmc.SGHMC, sgmcmc.CSGLD, swag.SWAG, swag.MULTISWAG, ivon.METHOD, svgd.METHOD):
    register_method(_method)


def prepare_data(model, data) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ``data`` (a :class:`Dataset` or ``(x, y)``) for ``model`` (:func:`~bnn.inference.core.model_data.checked_data`);
    return training tensors."""
    if isinstance(data, Dataset):
        x, y = data.x_train, data.y_train
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = data
    else:
        check_model(model)
        raise ValueError(f"data must be a Dataset, a pair (x, y) or a DataLoader, got {type(data).__name__}")
    return checked_data(model, x, y)


def fit(model, data, method: str = "svi", *, map_options: Mapping[str, Any] | None = None, **options: Any) -> Posterior:
    """Fit ``model`` to ``data`` with inference ``method`` and return the :class:`Posterior`.

    The fit computes where the option ``device`` says (``"cpu"``, the default; ``"cuda"``, refused before any work
    where torch sees no GPU; ``"auto"``, the GPU where there is one) and returns its posterior on the CPU
    (:mod:`bnn.inference.core.device`). On the CPU it computes on one torch thread, where a second thread gains nothing
    at this collection's sizes and costs much when another process wants the core, unless you chose a count
    (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, or ``torch.set_num_threads`` after importing ``bnn``; see
    the function :func:`~bnn.runtime.workers.fit_threads`).

    Parameters
    ----------
    model : BayesianNetwork
        The Pyro model: a :class:`~bnn.models.BayesianMLP`, or any network written on the model interface
        (:class:`~bnn.models.network.BayesianNetwork`).
    data : Dataset, (x, y) or DataLoader
        Training data; a :class:`~bnn.datasets.Dataset` also names the run in reports. A
        :class:`torch.utils.data.DataLoader` (or any iterable of ``(x, y)`` batches whose ``dataset`` has a length) is
        read once into tensors, and its batch size sets the method's ``batch_size`` and ``map_batch_size`` where they
        are left out; a method that computes on every row at each step (NUTS) refuses it
        (:mod:`bnn.inference.core.loader_data`).
    method : str
        A name in :data:`METHODS`.
    **options
        The method's options, the fields of its option set, ``METHODS.get(method).options`` (``bnn fit --help`` lists
        them; :doc:`/methods` describes each).
    map_options : mapping, optional
        For a partly Bayesian network (:func:`~bnn.models.torch_module.from_module` with ``bayesian=``) whose point
        parameters are not set yet: the options of the MAP fit that sets them first
        (:class:`~bnn.inference.point_estimate.MapOptions`; by default its defaults, with the method's ``seed``,
        ``progress`` and ``device``), :mod:`bnn.inference.core.point_parameters`. The posterior's model holds the
        point values found.

    Returns
    -------
    Posterior
        Its ``model`` is a copy of ``model`` taken when the fit started
        (:func:`~bnn.inference.core.model_snapshot.snapshot_model`): changing ``model`` afterwards
        (``model.prior = "laplace"``) changes neither this posterior nor what it saves.

    Raises
    ------
    TypeError
        For a ``model`` that is not a :class:`~bnn.models.network.BayesianNetwork`, before any work starts.
    ValueError
        For bad data, data or a model not on the CPU (give CPU tensors and ``device="cuda"``), an unknown method or
        option, ``device="cuda"`` without a GPU or for a method that computes on the CPU, a fit that needs more memory
        than the machine has available (:mod:`bnn.runtime.memory`), a model that cannot be copied, or a loader given
        to a method that takes no minibatches, before any work starts.
    """
    chosen: Method = METHODS.get(method)
    if is_loader(data):
        check_model(model)
        names = batch_options(chosen)  # a method that computes on every row refuses a loader before it is read
        x, y, batch_rows = read_loader(data, chosen.name)
        options, data = with_loader_batches(names, options, batch_rows), (x, y)
    x, y = prepare_data(model, data)
    if map_options is not None and not needs_point_fit(model):
        raise ValueError("map_options set the MAP fit of a partly Bayesian network's point parameters, and this "
                         f"{type(model).__name__} has none to fit; leave map_options out")
    if needs_point_fit(model):
        parsed = chosen.parse(options, model)  # every option and requirement checked before the MAP stage starts
        chosen.check_model(model, point_values_set=False)
        point_options = {"seed": getattr(parsed, "seed", 0), "progress": getattr(parsed, "progress", True),
                         "device": parsed.device, **(map_options or {})}
        METHODS.get("map").parse(point_options)
        model = fit_point_parameters(model, x, y, METHODS.get("map"), point_options)
    posterior = chosen(model, x, y, **options)
    if isinstance(data, Dataset):
        posterior.record.dataset = data.name
    return posterior
