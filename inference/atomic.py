"""Atomic writes: a crash leaves either the old result or the new one, never half of one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def write_json(path: str | Path, payload: Any) -> None:
    """Write ``payload`` as JSON to ``path`` through a temporary file and ``os.replace``."""
    path = Path(path)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        json.dump(payload, handle, indent=2, sort_keys=True, default=float)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)


@contextmanager
def atomic_directory(target: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh staging folder; on success it replaces ``target`` in one rename.

    On an exception the staging folder is removed and ``target`` is untouched.

    Raises
    ------
    ValueError
        When ``target`` exists and is not empty and ``overwrite`` is false.
    """
    target = Path(target)
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
