"""Atomic writes: a crash leaves either the old result or the new one, never half of one."""

from __future__ import annotations

import json
import math
import numbers
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Yield a handle on a temporary file beside ``path``; on success it is synced and renamed to ``path``.

    On an exception the temporary file is removed and ``path`` keeps its old content (or stays absent).
    """
    path = Path(path)
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as handle:
        try:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        except BaseException:
            handle.close()
            os.unlink(handle.name)
            raise
    os.replace(handle.name, path)


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite number (Python or NumPy), however deep in dicts and lists, made ``None``:
    JSON has no such numbers, and Python's ``json`` would write ``NaN``, which strict parsers refuse."""
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value):
        return None
    return value


def write_json(path: str | Path, payload: Any) -> None:
    """Write ``payload`` as strict JSON to ``path`` atomically (see :func:`atomic_file`): NaN and infinities as
    ``null`` (:func:`finite_or_null`), NumPy numbers as plain ones."""
    with atomic_file(path) as handle:
        json.dump(finite_or_null(payload), handle, indent=2, sort_keys=True, default=float, allow_nan=False)


@contextmanager
def atomic_directory(target: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh staging folder; on success it replaces ``target`` in one rename.

    On an exception the staging folder is removed and ``target`` is untouched.

    Raises
    ------
    ValueError
        When ``target`` or a folder above it is a file, or ``target`` exists and is not empty and
        ``overwrite`` is false.
    """
    target = Path(target)
    blocking = next((path for path in (target, *target.parents) if path.exists() and not path.is_dir()), None)
    if blocking is not None:
        below = "" if blocking == target else f", so the folder {target} cannot be made"
        raise ValueError(f"{blocking} is a file, not a folder{below}; choose another folder path")
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise ValueError(f"{target} exists and is not empty; choose another folder or pass overwrite=True (--overwrite)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        os.replace(target, retired / target.name)
        os.replace(staging, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, target)
