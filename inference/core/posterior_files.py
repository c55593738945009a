"""The files of a saved :class:`~bnn.inference.core.posterior.Posterior`, written into a folder and read back with
every part checked.

A folder holds ``fit.json`` (the model's config, the fit's record, and the SHA-256 of every other file it holds),
``posterior.nc`` (ArviZ netCDF), for a method with a linearised predictive ``linearization.pt`` (tensors, read with
``torch.load(weights_only=True)``), and for a network with tensors beyond its config (a torch module made Bayesian,
:mod:`bnn.models.torch_module`) ``network.safetensors``: its weights, buffers and point values, read as tensors
only. Nothing in a folder is code. The module's structure is code; it is given again when loading
(``Posterior.load(path, module=net)``, checked against the saved structure and shapes), and only when the caller
says so (``trust=True``) unpickled from ``module.pt``, written beside for that use alone.

A folder is checked before anything in it is read: each file ``fit.json`` lists must have its SHA-256, and any
other file there (beside ``fit.json`` and what the folder's marker, :data:`~bnn.runtime.atomic.MARKER`, lists as the
writing command's own files, such as ``bnn fit``'s ``metrics.json``) is refused by name, as is any posterior file
``fit.json`` does not list. A file changed after the fit, a file from another fit and a planted file are refused
before any is read.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from bnn.inference.core.record import read_record
from bnn.models.network import OBSERVED_SITE, BayesianNetwork, ModuleMismatchError, network_from_config
from torch import nn

from bnn.runtime.atomic import MARKER, check_free_space, result_listing, write_json
from bnn.runtime.lazy_arviz import az

SCHEMA_VERSION = 3  # 3: the SHA-256 of every file under "files", the network's tensors as safetensors
POSTERIOR_FILE = "posterior.nc"
FIT_FILE = "fit.json"
LINEARIZATION_FILE = "linearization.pt"
NETWORK_TENSORS_FILE = "network.safetensors"
MODULE_PICKLE_FILE = "module.pt"
POSTERIOR_FILES = (POSTERIOR_FILE, LINEARIZATION_FILE, NETWORK_TENSORS_FILE, MODULE_PICKLE_FILE, "network.pt")
"""The names a posterior's files may have (``network.pt``: the pickled state of schema 2, never read): a folder
holding one that ``fit.json`` does not list is refused."""
FIT_ENTRIES = {"schema_version", "model", "record", "files"}  # the entries of fit.json


def _written_groups(idata: az.InferenceData, log_likelihood: bool) -> list[str]:
    """The groups of ``idata`` that :func:`write_netcdf` writes."""
    left_out = {"posterior_predictive"} | (set() if log_likelihood else {"log_likelihood"})
    return [group for group in idata.groups() if group not in left_out]


def write_netcdf(idata: az.InferenceData, path: str | Path, log_likelihood: bool = True) -> None:
    """Write ``idata`` to the netCDF file ``path`` without what can be remade from the draws: not the
    ``posterior_predictive`` group, and the pointwise log-likelihood in float32 (or, with ``log_likelihood=False``,
    not at all)."""
    kept = {group: getattr(idata, group) for group in _written_groups(idata, log_likelihood)}
    if log_likelihood:
        kept["log_likelihood"] = kept["log_likelihood"].astype(np.float32)
    az.InferenceData(**kept).to_netcdf(str(path))


def netcdf_bytes(idata: az.InferenceData, log_likelihood: bool = True) -> int:
    """About the bytes :func:`write_netcdf` writes for ``idata``: its arrays, the log-likelihood in float32."""
    return sum(array.nbytes // (2 if group == "log_likelihood" and array.dtype.itemsize == 8 else 1)
               for group in _written_groups(idata, log_likelihood)
               for array in getattr(idata, group).data_vars.values())


def sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as hexadecimal."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_posterior(posterior, folder: Path, log_likelihood: bool = True) -> None:
    """Write the files of ``posterior`` into the existing ``folder`` (inside an atomic write), after checking that its
    file system has room for them (:func:`~bnn.runtime.atomic.check_free_space`); ``fit.json`` last, listing the
    SHA-256 of the others. ``log_likelihood=False`` leaves the pointwise log-likelihood out of ``posterior.nc``."""
    idata = posterior.to_inference_data()
    linearization = 0 if posterior.linearization is None else posterior.linearization.nbytes()
    tensors = posterior.model.state()
    state_bytes = 0 if tensors is None else sum(value.nbytes for value in tensors.values())
    check_free_space(folder, netcdf_bytes(idata, log_likelihood) + linearization + state_bytes,
                     f"the posterior ({POSTERIOR_FILE})")
    written = [POSTERIOR_FILE]
    write_netcdf(idata, folder / POSTERIOR_FILE, log_likelihood)
    if posterior.linearization is not None:
        posterior.linearization.save(folder / LINEARIZATION_FILE)
        written.append(LINEARIZATION_FILE)
    if tensors is not None:
        safetensors.torch.save_file({name: value.detach().cpu().contiguous().clone() for name, value in tensors.items()},
                                    str(folder / NETWORK_TENSORS_FILE))
        written.append(NETWORK_TENSORS_FILE)
        if _write_module_pickle(posterior.model, folder / MODULE_PICKLE_FILE):
            written.append(MODULE_PICKLE_FILE)
    write_json(folder / FIT_FILE, {"schema_version": SCHEMA_VERSION, "model": posterior.model.config(),
                                   "record": posterior.record.to_json(),
                                   "files": {name: sha256(folder / name) for name in written}})


def _write_module_pickle(model: BayesianNetwork, path: Path) -> bool:
    """Pickle the network's module to ``path``, read back only under ``trust=True``; ``False`` (nothing written) for a
    network without one or a module that cannot be pickled (a class defined inside a function), which then loads
    only with the module given again."""
    module = model.state_module()
    if module is None:
        return False
    try:
        torch.save(module, path)
    except (pickle.PicklingError, AttributeError, TypeError):  # a local class, a lambda, a lock
        path.unlink(missing_ok=True)
        return False
    return True


def read_posterior(directory: str | Path, module: nn.Module | None = None, trust: bool = False) -> dict[str, Any]:
    """The parts of the posterior saved in ``directory``, as keyword arguments of
    :class:`~bnn.inference.core.posterior.Posterior`; the model is rebuilt from registered names, and a torch module
    network from ``module`` (or, with ``trust=True``, from ``module.pt``).

    Raises
    ------
    ValueError
        For a missing, damaged, changed or foreign folder, a file in it that its ``fit.json`` does not list, one written
        by another schema version, and a torch module network loaded without its module or with another one.
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
        raise ValueError(f"{fit_file} has schema version {found!r}; this version reads {SCHEMA_VERSION}: {again}")
    unknown = sorted(set(meta) - FIT_ENTRIES)
    if unknown:
        raise ValueError(f"{fit_file} has unknown entries {unknown}; it holds {sorted(FIT_ENTRIES)}: {again}")
    listed = _checked_files(directory, meta.get("files"))
    state = _network_tensors(directory / NETWORK_TENSORS_FILE) if NETWORK_TENSORS_FILE in listed else None
    if module is None and trust and MODULE_PICKLE_FILE in listed:
        module = _unpickled_module(directory / MODULE_PICKLE_FILE)
    try:
        model = network_from_config(meta["model"], state, module)
        record = read_record(meta["record"])
    except ModuleMismatchError as error:
        raise ModuleMismatchError(f"{directory}: {error}") from None
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


def _checked_files(directory: Path, files: Any) -> set[str]:
    """The names of the files ``fit.json`` lists (``files``: name -> SHA-256), after checking each against its digest
    and that the folder holds no other file but ``fit.json`` and its marker's (module notes); ``ValueError`` naming
    the file."""
    fit_file = directory / FIT_FILE
    if not isinstance(files, dict) or not all(isinstance(name, str) and isinstance(digest, str)
                                              for name, digest in files.items()):
        raise ValueError(f"{fit_file} does not list its files with their SHA-256 (its 'files' entry is missing or not "
                         "an object of names and digests); it is damaged: fit and save the posterior again")
    for name, digest in files.items():
        path = directory / name
        if name not in POSTERIOR_FILES or name != Path(name).name:
            raise ValueError(f"{fit_file} lists {name!r}, which is not a posterior's file ({', '.join(POSTERIOR_FILES)}); "
                             "it is damaged: fit and save the posterior again")
        if not path.is_file():
            raise ValueError(f"{path} is missing: {fit_file} lists it among the fit's files; copy the whole folder")
        if sha256(path) != digest:
            raise ValueError(f"{path} is not the file this fit wrote: its SHA-256 differs from the one {fit_file} lists "
                             "(changed since, or from another fit); nothing was loaded: fit and save the posterior again")
    commands = result_listing(directory)
    for path in sorted(directory.iterdir()):
        name = path.name
        if name in files or name in (FIT_FILE, MARKER) or (name in commands and name not in POSTERIOR_FILES):
            continue
        raise ValueError(f"{path} is not one of the files this fit wrote ({FIT_FILE} lists {sorted(files)}): a file "
                         "put there later, or from another fit; nothing was loaded: remove it, or load a copy of the "
                         "folder without it")
    return set(files)


def _network_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors saved at ``path`` (read as tensors only: no code runs)."""
    try:
        return safetensors.torch.load_file(str(path))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own types for a damaged file
        raise ValueError(f"{path} cannot be read as tensors ({type(error).__name__}: {error}); it is damaged: fit and "
                         "save the posterior again") from None


def _unpickled_module(path: Path) -> nn.Module:
    """The module pickled at ``path``, unpickled (``trust=True`` only: unpickling runs code the file names)."""
    try:
        module = torch.load(path, weights_only=False)
    except Exception as error:  # noqa: BLE001 - unpickling raises many types (a class no longer importable, ...)
        raise ValueError(f"{path} cannot be unpickled ({type(error).__name__}: {error}); its module class must be "
                         "importable here: give the module instead, Posterior.load(path, module=...)") from None
    if not isinstance(module, nn.Module):
        raise ValueError(f"{path} does not hold a torch.nn.Module (it holds a {type(module).__name__}); give the module "
                         "instead, Posterior.load(path, module=...)")
    return module


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
