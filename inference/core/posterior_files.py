"""The files of a saved :class:`~bnn.inference.core.posterior.Posterior`: ``posterior.nc`` (ArviZ netCDF),
``fit.json`` (the model's config and the fit's record), for a method with a linearised predictive,
``linearization.pt``, and for a network with a state beyond its config (a torch module made Bayesian,
:mod:`bnn.models.torch_module`) ``network.pt``; written into a folder and read back with every part checked.

``network.pt`` is read with ``torch.load(weights_only=False)``, which unpickles arbitrary objects: load only folders
you wrote or trust."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import torch
from bnn.inference.core.record import read_record
from bnn.models.network import OBSERVED_SITE, BayesianNetwork, network_from_config

from bnn.runtime.atomic import check_free_space, write_json

SCHEMA_VERSION = 2  # 2: the typed fit record under "record" (1 had an untyped "info")
POSTERIOR_FILE = "posterior.nc"
FIT_FILE = "fit.json"
LINEARIZATION_FILE = "linearization.pt"
NETWORK_STATE_FILE = "network.pt"
FIT_ENTRIES = {"schema_version", "model", "record"}  # the entries of fit.json


def write_netcdf(idata: az.InferenceData, path: str | Path) -> None:
    """Write ``idata`` to the netCDF file ``path`` without what can be remade from the draws: not the
    ``posterior_predictive`` group, and the pointwise log-likelihood in float32."""
    kept = {group: getattr(idata, group) for group in idata.groups() if group != "posterior_predictive"}
    kept["log_likelihood"] = kept["log_likelihood"].astype(np.float32)
    az.InferenceData(**kept).to_netcdf(str(path))


def netcdf_bytes(idata: az.InferenceData) -> int:
    """About the bytes :func:`write_netcdf` writes for ``idata``: its arrays, the log-likelihood in float32."""
    groups = [group for group in idata.groups() if group != "posterior_predictive"]
    return sum(array.nbytes // (2 if group == "log_likelihood" and array.dtype.itemsize == 8 else 1)
               for group in groups for array in getattr(idata, group).data_vars.values())


def write_posterior(posterior, folder: Path) -> None:
    """Write the files of ``posterior`` into the existing ``folder`` (inside an atomic write), after checking that its
    file system has room for them (:func:`~bnn.runtime.atomic.check_free_space`)."""
    idata = posterior.to_inference_data()
    linearization = 0 if posterior.linearization is None else posterior.linearization.nbytes()
    check_free_space(folder, netcdf_bytes(idata) + linearization, f"the posterior ({POSTERIOR_FILE})")
    write_netcdf(idata, folder / POSTERIOR_FILE)
    write_json(folder / FIT_FILE, {"schema_version": SCHEMA_VERSION, "model": posterior.model.config(),
                                   "record": posterior.record.to_json()})
    if posterior.linearization is not None:
        posterior.linearization.save(folder / LINEARIZATION_FILE)
    state = posterior.model.state()
    if state is not None:
        torch.save(state, folder / NETWORK_STATE_FILE)


def read_posterior(directory: str | Path) -> dict[str, Any]:
    """The parts of the posterior saved in ``directory``, as keyword arguments of
    :class:`~bnn.inference.core.posterior.Posterior`; the model is rebuilt from registered names.

    Raises
    ------
    ValueError
        For a missing or damaged folder, or one written by another schema version.
    """
    directory = Path(directory)
    fit_file, posterior_file = directory / FIT_FILE, directory / POSTERIOR_FILE
    for path in (fit_file, posterior_file):
        if not path.is_file():
            raise ValueError(f"{directory} is not a saved posterior: {path.name} is missing")
    again = "fit and save the posterior again with this version"
    try:
        meta = json.loads(fit_file.read_text(), parse_constant=_refuse_constant)
    except ValueError as error:  # not UTF-8 text, or not JSON (NaN and Infinity are not)
        raise ValueError(f"{fit_file} is damaged ({type(error).__name__}: {error}); {again}") from None
    if not isinstance(meta, dict) or meta.get("schema_version") != SCHEMA_VERSION:
        found = meta.get("schema_version") if isinstance(meta, dict) else None
        raise ValueError(f"{fit_file} has schema version {found!r}; this version reads {SCHEMA_VERSION}")
    unknown = sorted(set(meta) - FIT_ENTRIES)
    if unknown:
        raise ValueError(f"{fit_file} has unknown entries {unknown}; it holds {sorted(FIT_ENTRIES)}: {again}")
    state = _network_state(directory / NETWORK_STATE_FILE)
    try:
        model = network_from_config(meta["model"], state)
        record = read_record(meta["record"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{fit_file} is damaged or from another version: its model or record entry is missing or "
                         f"invalid ({type(error).__name__}: {error}); {again}") from None
    try:
        idata = az.from_netcdf(str(posterior_file))
    except Exception as error:  # netCDF/HDF5 raise many types for a damaged file
        raise ValueError(f"{posterior_file} cannot be read: {error}") from None
    written = getattr(idata, "constant_data", None)
    drawn_by = (None, None) if written is None else (written.attrs.get("method"), written.attrs.get("guide"))
    if drawn_by[0] is not None and drawn_by != (record.method, str(record.guide)):
        raise ValueError(f"{posterior_file} holds the draws of a {drawn_by[0]} fit (guide {drawn_by[1]}), {fit_file} the "
                         f"record of a {record.method} fit (guide {record.guide}): the files are from different fits; "
                         f"{again}")
    dtype = torch.get_default_dtype()
    try:
        samples = {name: torch.as_tensor(idata.posterior[name].values, dtype=dtype) for name in model.latent_shapes}
        x = torch.as_tensor(idata.constant_data["x"].values, dtype=dtype)
        y = torch.as_tensor(idata.observed_data[OBSERVED_SITE].values)
    except (AttributeError, KeyError) as error:  # a group or variable is missing
        raise ValueError(f"{posterior_file} does not hold the draws and data of the model in {fit_file} "
                         f"({type(error).__name__}: {error}); it is damaged or from another fit: {again}") from None
    x, y = _checked_saved_data(posterior_file, model, samples, x, y)
    y = model.likelihood.check_targets(y, model.out_features)
    stats = {k: v.values for k, v in idata.sample_stats.data_vars.items()} if "sample_stats" in idata.groups() else None
    linearization = record.load_linearization(directory / LINEARIZATION_FILE, model)
    constants = {k: v.values for k, v in idata.constant_data.data_vars.items() if k != "x"}
    return {"model": model, "samples": samples, "x": x, "y": y, "record": record, "sample_stats": stats,
            "linearization": linearization, "constants": constants}


def _network_state(path: Path) -> Any:
    """The network's state saved at ``path`` (``None`` when there is no such file), unpickled: see the module notes."""
    if not path.is_file():
        return None
    try:
        return torch.load(path, weights_only=False)
    except Exception as error:  # noqa: BLE001 - unpickling raises many types (a class no longer importable, ...)
        raise ValueError(f"{path} cannot be read ({type(error).__name__}: {error}); the network's module class must be "
                         "importable here; else fit and save the posterior again") from None


def _refuse_constant(name: str) -> None:
    """``json.loads``'s hook for ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON (the writer writes
    ``null``)."""
    raise ValueError(f"{name} is not a JSON number")


def _checked_saved_data(path: Path, model: BayesianNetwork, samples: dict[str, torch.Tensor], x: torch.Tensor,
                        y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The training data read from ``path``, checked as ``fit`` checks it, after checking that every site's draws
    have the shape ``(chains, draws, *site_shape)`` of the model and hold no NaN (an infinite draw can be a value a
    fit kept, such as the noise scale of an SVI fit stopped by a non-finite ELBO); ``ValueError`` names the file and
    the site or the data's problem."""
    from bnn.datasets.validation import check_inputs_targets

    for name, value in samples.items():
        shape = tuple(model.latent_shapes[name])
        if value.dim() != 2 + len(shape) or tuple(value.shape[2:]) != shape:
            raise ValueError(f"{path}: the draws of {name!r} have shape {tuple(value.shape)}; the model in {FIT_FILE} "
                             f"needs (chains, draws, *{shape}); the files are from different fits")
        bad = int(value.isnan().sum())
        if bad:
            raise ValueError(f"{path}: the draws of {name!r} hold {bad} NaN of {value.numel()} values; the file is "
                             "damaged: fit and save the posterior again")
    try:
        return check_inputs_targets(x, y)
    except ValueError as error:
        raise ValueError(f"{path}: its training data (constant_data 'x', observed_data {OBSERVED_SITE!r}) is damaged: "
                         f"{error}") from None
