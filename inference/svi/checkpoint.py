r"""SVI checkpoints: a run's state at a step boundary, written atomically, read without running code.

A checkpoint (``svi-checkpoint.pt`` in its folder) holds what the SVI loop needs to continue
exactly where it stopped, so that a resumed run ends with the same numbers as one never
stopped:

- the guide's parameters, unconstrained, as Pyro's param store holds them;
- the optimiser's state, ``PyroOptim.get_state()`` (Adam's moments, a scheduler's counters);
- the steps done and the ELBO history so far;
- torch's RNG state (Pyro, the ELBO draws and the minibatch shuffles all draw from torch) and
  the current epoch's minibatch order.

It also records a schema version, why it was written (``periodic``, a stop signal, a
non-finite ELBO, ``finished``) and the fit it belongs to: the model's config, the guide, a
SHA-256 digest of the training data and the options that shape the trajectory. Resuming
another fit is refused with the differences named.

The file is written with ``torch.save`` to a temporary file that replaces the old one in one
rename (a kill leaves the previous checkpoint whole), and holds only tensors, numbers,
strings, lists and dicts, so it loads with ``torch.load(..., weights_only=True)``, which
executes no code.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyro
import torch

from bnn.runtime.atomic import atomic_file

CHECKPOINT_FILE = "svi-checkpoint.pt"
DEFAULT_CHECKPOINT_EVERY = 1000
"""Steps between periodic checkpoints when a fit has a checkpoint folder but no ``checkpoint_every``."""
FORMAT = "bnn-svi-checkpoint"
SCHEMA_VERSION = 1


def data_digest(*tensors: torch.Tensor) -> str:
    """SHA-256 of the tensors' dtypes, shapes and bytes."""
    digest = hashlib.sha256()
    for tensor in tensors:
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def fit_fingerprint(model, x: torch.Tensor, y: torch.Tensor, guide: str, guide_options: dict[str, Any],
                    options: dict[str, Any]) -> str:
    """The fit a checkpoint belongs to, as canonical JSON (values JSON cannot hold are compared by ``repr``)."""
    fingerprint = {"model": model.config(), "guide": guide, "guide_options": guide_options,
                   "data": data_digest(x, y), "options": options}
    return json.dumps(fingerprint, sort_keys=True, default=repr)


@dataclass
class TrainingState:
    """An SVI run between two steps.

    Attributes
    ----------
    step : int
        Steps done, the index of the next step.
    elbo : list of float
        The ELBO of every step done.
    params : dict of str to torch.Tensor
        The guide's unconstrained parameters by param-store name.
    optimiser : dict
        ``PyroOptim.get_state()``.
    rng : torch.Tensor
        ``torch.get_rng_state()`` at the boundary.
    permutation : torch.Tensor
        The current epoch's order of the training examples.
    """

    step: int
    elbo: list[float]
    params: dict[str, torch.Tensor]
    optimiser: dict
    rng: torch.Tensor
    permutation: torch.Tensor

    @classmethod
    def capture(cls, step: int, elbo: list[float], optimiser, rng: torch.Tensor, permutation: torch.Tensor) -> TrainingState:
        """The state of the fit whose parameters fill Pyro's param store now (copied)."""
        params = {name: value.detach().clone() for name, value in pyro.get_param_store().named_parameters()}
        return cls(step, list(elbo), params, copy.deepcopy(optimiser.get_state()), rng.clone(), permutation.clone())

    def restore(self, optimiser) -> None:
        """Copy the parameters into the param store's (already created) ones, queue the optimiser
        state for ``optimiser`` and set torch's RNG.

        Parameters pair up in the order the guide created them: names may differ, since guides such as
        the mean-field ones number their instances (``MeanFieldGuide_3.loc_rho``).

        Raises
        ------
        ValueError
            When the param store's parameters are not the checkpoint's (count or shapes).
        """
        current = dict(pyro.get_param_store().named_parameters())
        saved_shapes = [tuple(value.shape) for value in self.params.values()]
        current_shapes = [tuple(value.shape) for value in current.values()]
        if saved_shapes != current_shapes:
            raise ValueError(f"the checkpoint's guide parameters {dict(zip(self.params, saved_shapes))} are not this "
                             f"guide's {dict(zip(current, current_shapes))}; resume with the guide and options that "
                             "wrote the checkpoint")
        renamed = dict(zip(self.params, current))
        with torch.no_grad():
            for name, value in self.params.items():
                current[renamed[name]].copy_(value)
        optimiser.set_state({renamed[name]: state for name, state in self.optimiser.items()})
        torch.set_rng_state(self.rng)


def checkpoint_target(checkpoint_dir: str | Path | None, resume: str | Path | None) -> Path | None:
    """The folder a fit writes its checkpoints to: ``checkpoint_dir``, else the ``resume`` folder, else none.

    Raises
    ------
    ValueError
        When the folder already holds a checkpoint and is not the one being resumed (it is another
        fit's, or this fit's to continue with ``resume``).
    """
    target = None if checkpoint_dir is None and resume is None else Path(checkpoint_dir or resume)
    if target is not None and (target / CHECKPOINT_FILE).exists() and (
        resume is None or Path(resume).resolve() != target.resolve()
    ):
        raise ValueError(f"{target} already holds an SVI checkpoint; continue it with resume={str(target)!r} "
                         "(--resume), or delete it or choose another checkpoint folder")
    return target


def _differences(before: Any, now: Any, path: str = "") -> list[str]:
    """``"model.hidden: checkpoint [5], this fit [6]"`` for every leaf where two decoded fingerprints differ."""
    if isinstance(before, dict) and isinstance(now, dict):
        return [line for key in sorted(set(before) | set(now))
                for line in _differences(before.get(key), now.get(key), f"{path}.{key}" if path else key)]
    return [] if before == now else [f"{path}: checkpoint {before!r}, this fit {now!r}"]


class CheckpointFolder:
    """The folder that holds one fit's :class:`TrainingState`, ``svi-checkpoint.pt``.

    Parameters
    ----------
    directory : str or Path
        The folder (created on the first write).
    fingerprint : str
        :func:`fit_fingerprint` of the fit writing or resuming.
    """

    def __init__(self, directory: str | Path, fingerprint: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CHECKPOINT_FILE
        self.fingerprint = fingerprint

    def write(self, state: TrainingState, reason: str) -> Path:
        """Replace the checkpoint with ``state`` atomically; return the file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "fit": self.fingerprint, "reason": reason,
                   **asdict(state)}
        with atomic_file(self.path, "wb") as handle:
            torch.save(payload, handle)
        return self.path

    def read(self) -> tuple[TrainingState, str]:
        """The saved state and why it was written.

        Raises
        ------
        ValueError
            When the folder or file is missing, the file is unreadable or not a checkpoint, has another
            schema version, lacks a field, or belongs to another fit (the differences are named).
        """
        if not self.directory.is_dir():
            raise ValueError(f"cannot resume from {self.directory}: no such folder")
        if not self.path.is_file():
            raise ValueError(f"{self.directory} is not an SVI checkpoint folder: {CHECKPOINT_FILE} is missing "
                             "(checkpoints are written by fit(..., checkpoint_dir=...) or --checkpoint-every)")
        try:
            payload = torch.load(self.path, weights_only=True)
        except Exception as error:  # a damaged zip or pickle raises many types
            raise ValueError(f"{self.path} cannot be read ({type(error).__name__}: {error}); it is damaged or not "
                             "a checkpoint: start the fit again without resume") from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT or not isinstance(payload.get("fit"), str):
            raise ValueError(f"{self.path} is not an SVI checkpoint of this package")
        if payload.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"{self.path} has schema version {payload.get('schema_version')!r}; "
                             f"this version reads {SCHEMA_VERSION}")
        if payload["fit"] != self.fingerprint:
            raise ValueError(f"{self.path} was written by another fit; resume with the same model, guide, data and "
                             "options. Differences: "
                             + "; ".join(_differences(json.loads(payload["fit"]), json.loads(self.fingerprint))))
        missing = [name for name in (*TrainingState.__dataclass_fields__, "reason") if name not in payload]
        if missing:
            raise ValueError(f"{self.path} is damaged or from another version: it lacks {missing}; "
                             "start the fit again without resume")
        return TrainingState(**{name: payload[name] for name in TrainingState.__dataclass_fields__}), payload["reason"]
