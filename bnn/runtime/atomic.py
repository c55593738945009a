"""Atomic writes: a crash or a kill leaves either the old result or the new one, never half of one, never neither.

A result folder is written into a staging folder beside it and swapped in when complete. On Linux the swap is one
``renameat2(..., RENAME_EXCHANGE)`` call: at every instant the target holds the old or the new folder. Elsewhere (or
on a file system without the exchange) it is two renames, the old folder first moved aside to a ``.old`` name; a
kill between them is repaired by the next write to the same target, which puts the old folder back. Staging names
carry the writer's process id: a later write removes the staging folders of processes that are gone, and only them.

Every folder written here holds a marker, :data:`MARKER`, that lists its entries, its state (``complete``,
``stopped`` or ``checkpoint``) and its writer (``bnn fit``, ``bnn compare``, ``Posterior.save``, ...: what a refusal
names). Only an empty folder or one the marker recognises (every entry listed) is ever
replaced: a folder with files this package did not write is refused, whatever ``overwrite`` says.
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import numbers
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

MARKER = ".bnn-result.json"
"""The file that makes a folder recognisably ours: ``{"written_by": "bnn", "state": ..., "files": [...],
"writer": ...}``."""
STATES = ("complete", "stopped", "checkpoint")
"""What a marked folder holds: a complete result, the result of a stopped fit, or only a run's checkpoint."""
RUN_STATE = "run"
"""The state of a resumable run's folder, written into in place by the command its marker names
(:mod:`bnn.runtime.run_folder`); not one of :data:`STATES`, so no atomic write ever replaces it."""
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
FREE_SPACE_MARGIN = 1 << 20
"""Bytes kept free beyond a write's estimate (file system metadata, the marker, small files)."""


@contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Yield a handle on a temporary file beside ``path``; on success it is synced and renamed to ``path``.

    On an exception the temporary file is removed and ``path`` keeps its old content (or stays absent); a full disk
    raises ``ValueError`` saying so.
    """
    path = Path(path)
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as handle:
        try:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        except BaseException as error:
            try:
                handle.close()
            except OSError:
                pass  # on a full disk the close's own flush fails too; the file goes all the same
            os.unlink(handle.name)
            _raise_if_disk_full(error, path)
            raise
    os.replace(handle.name, path)


def _raise_if_disk_full(error: BaseException, path: Path) -> None:
    """Turn ``error`` into a ``ValueError`` naming ``path`` when it is a full disk (ENOSPC, EDQUOT), which left ``path``
    as it was."""
    if isinstance(error, OSError) and error.errno in _DISK_FULL:
        raise ValueError(f"the disk that holds {path} is full ({error.strerror}); {path} holds what it held before: free "
                         "space there or choose another --out") from None


def blocking_file(path: Path) -> Path | None:
    """``path`` or the nearest folder above it that exists as a file (so that ``path`` cannot be a folder), else
    ``None``."""
    return next((part for part in (path, *path.parents) if part.exists() and not part.is_dir()), None)


def check_free_space(folder: str | Path, needed: int, what: str) -> None:
    """Refuse (``ValueError``) to write ``what``, about ``needed`` bytes, into ``folder`` when its file system has less
    free than that and :data:`FREE_SPACE_MARGIN`: a library that meets a full disk mid-file may crash rather than
    raise (HDF5 did, writing netCDF)."""
    free = shutil.disk_usage(folder).free
    if free < needed + FREE_SPACE_MARGIN:
        raise ValueError(f"{what} needs about {(needed + FREE_SPACE_MARGIN) / 2**20:.1f} MiB in {folder}, and its file "
                         f"system has {free / 2**20:.1f} MiB free: free space there or choose another --out")


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


def result_state(folder: str | Path) -> str | None:
    """The state its marker gives a folder this package wrote (one of :data:`STATES`); ``None`` for a folder that
    is absent, unmarked, or holds an entry its marker does not list (a file someone else put there)."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER).read_text())
        entries = {path.name for path in folder.iterdir()} - {MARKER}
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("written_by") != "bnn" or marker.get("state") not in STATES:
        return None
    listed = marker.get("files")
    return marker["state"] if isinstance(listed, list) and entries <= set(listed) else None


def _marker(folder: str | Path) -> dict | None:
    """The marker of ``folder`` when this package wrote it, else ``None``."""
    try:
        marker = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("written_by") == "bnn" else None


def result_listing(folder: str | Path) -> set[str]:
    """The entries the marker of ``folder`` lists (empty when it is unmarked or not ours)."""
    listed = (_marker(folder) or {}).get("files")
    return {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()


def marked_writer(folder: str | Path) -> str | None:
    """The ``writer`` the marker of ``folder`` names (``None``: unmarked, or marked before markers named it)."""
    writer = (_marker(folder) or {}).get("writer")
    return writer if isinstance(writer, str) else None


def run_writer(folder: str | Path) -> str | None:
    """The ``writer`` the marker of ``folder`` names when it marks a run folder (state :data:`RUN_STATE`), else
    ``None``."""
    return marked_writer(folder) if (_marker(folder) or {}).get("state") == RUN_STATE else None


def mark(folder: str | Path, state: str, files: Iterable[str] | None = None, writer: str | None = None) -> None:
    """Write the marker of ``folder``: ``state``, ``files`` (default: its entries now) and ``writer`` (default: the
    one its marker names now, if any)."""
    folder = Path(folder)
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got {state!r}")
    names = sorted({path.name for path in folder.iterdir()} - {MARKER} if files is None else set(files))
    marker = {"written_by": "bnn", "state": state, "files": names, "writer": writer or marked_writer(folder)}
    write_json(folder / MARKER, {key: value for key, value in marker.items() if value is not None})


def claim_entry(folder: str | Path, name: str) -> None:
    """Record in the marker of ``folder`` that its entry ``name`` (a run's checkpoint folder) is ours.

    An absent or empty ``folder`` is created and marked ``checkpoint`` (it holds only a run's checkpoint so far);
    a folder of ours keeps its state and gains ``name``; any other folder is refused by
    :func:`check_replaceable` first.
    """
    folder = Path(folder)
    check_replaceable(folder, overwrite=True)
    folder.mkdir(parents=True, exist_ok=True)
    state = result_state(folder)
    if state is None:
        mark(folder, "checkpoint", [name])
        return
    listed = json.loads((folder / MARKER).read_text())["files"]
    mark(folder, state, {*listed, name})


def check_replaceable(target: str | Path, *, overwrite: bool) -> None:
    """Refuse a ``target`` that a write must not replace, before any work.

    Raises
    ------
    ValueError
        When ``target`` or a folder above it is a file; when ``target`` is a mount point (a rename cannot replace it:
        ``EBUSY`` after the work); when ``target`` holds entries this package did not write (:func:`result_state` is
        ``None``), whatever ``overwrite`` says; when it holds a result of ours and ``overwrite`` is false.
    """
    target = Path(target)
    blocking = blocking_file(target)
    if blocking is not None:
        below = "" if blocking == target else f", so the folder {target} cannot be made"
        raise ValueError(f"{blocking} is a file, not a folder{below}; choose another folder path")
    if target.exists() and os.path.ismount(target):
        raise ValueError(f"{target} is a mount point: a result is swapped in by renaming a complete folder onto it, which "
                         f"cannot replace a mount point; choose a folder inside it, such as {target / 'run'}")
    if not target.exists() or not any(target.iterdir()):
        return
    if result_state(target) is None:
        writer = run_writer(target)
        if writer is not None:
            raise ValueError(f"{target} holds a run of `bnn {writer}` (its {MARKER} says so), which only that command "
                             "writes into and nothing replaces: choose another folder")
        stranger = sorted(path.name for path in target.iterdir())[:3]
        raise ValueError(f"{target} holds files this tool did not write ({', '.join(stranger)}, ...); it replaces only an "
                         "empty folder or a result it wrote, so nothing there is touched: choose another folder")
    if not overwrite:
        writer = marked_writer(target)
        held = "exists and is not empty" if writer is None else f"holds a result of `{writer}`"
        raise ValueError(f"{target} {held}; choose another folder or pass overwrite=True (--overwrite) to replace it")


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder``: an unnamed one (Linux ``O_TMPFILE``), which a kill cannot leave
    behind, where the file system allows; else a named one."""
    if hasattr(os, "O_TMPFILE"):
        try:
            os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600))
            return
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".bnn-probe-"):
        pass


def check_writable(target: str | Path) -> None:
    """Create and remove a probe file in the nearest existing folder at or above ``target``'s parent.

    Raises
    ------
    ValueError
        When that folder cannot be written (read-only, ``/proc``, no permission), naming it.
    """
    parent = Path(target).absolute().parent
    existing = next(path for path in (parent, *parent.parents) if path.exists())
    try:
        _probe(existing)
    except OSError as error:
        raise ValueError(f"cannot write into {existing} ({error.strerror or error}), where {target} would go; choose "
                         "an --out in a folder you can write") from None


def check_apart(target: str | Path, inputs: dict[str, Path | None]) -> None:
    """Refuse an output folder that is, contains or lies inside an input, or is or contains the current folder, the
    home folder or the root.

    Parameters
    ----------
    target : str or Path
        The output folder.
    inputs : dict of str to Path or None
        Each input folder by the option that names it (``{"--uci-dir": ...}``); ``None`` entries are skipped.

    Raises
    ------
    ValueError
        Naming the input and the option.
    """
    out = Path(target).resolve()
    for option, folder in inputs.items():
        if folder is None:
            continue
        where = Path(folder).resolve()
        if out == where or out in where.parents or where in out.parents:
            relation = "is" if out == where else "contains" if out in where.parents else "lies inside"
            raise ValueError(f"--out {target} {relation} the {option} folder {folder}, an input that is never replaced; "
                             "choose an --out apart from it")
    for name, folder in (("the current folder", Path.cwd()), ("your home folder", Path.home()), ("the root", Path("/"))):
        if out == folder.resolve() or out in folder.resolve().parents:
            raise ValueError(f"--out {target} is or contains {name} ({folder}), which is never replaced; choose a folder "
                             "of its own, such as results/run")


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``); ``False`` where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def _replace(staging: Path, target: Path, retired: Path) -> None:
    """Put ``staging`` at ``target``: one rename, one exchange, or (no exchange) two renames via ``retired``."""
    if not target.exists():
        os.replace(staging, target)
    elif _exchange(staging, target):
        shutil.rmtree(staging)  # it now holds the old folder
    else:
        os.replace(target, retired)
        try:
            os.replace(staging, target)
        except BaseException:
            os.replace(retired, target)
            raise
        shutil.rmtree(retired)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _staging_name(target: Path, kind: str, token: str) -> Path:
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{token}")


def _dead_staging(target: Path, kind: str) -> list[Path]:
    """The ``kind`` (``partial`` or ``old``) staging folders of ``target`` whose writer process is gone."""
    dead = []
    for path in target.parent.glob(f".{target.name}.{kind}-*-*"):
        pid = path.name[len(f".{target.name}.{kind}-"):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            dead.append(path)
    return dead


def recover(target: str | Path) -> None:
    """Repair what killed writers of ``target`` left: put back an old folder moved aside by a writer killed between
    its two renames (when ``target`` is missing), and remove the staging folders of writers that are gone."""
    target = Path(target)
    if not target.parent.is_dir():
        return
    for old in _dead_staging(target, "old"):
        if not target.exists():
            os.replace(old, target)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for partial in _dead_staging(target, "partial"):
        shutil.rmtree(partial, ignore_errors=True)


@contextmanager
def atomic_directory(target: str | Path, *, writer: str, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh staging folder; on success it is marked (``complete`` unless the block called :func:`mark`) as
    written by ``writer`` (the command or call a user knows it by) and replaces ``target`` in one step.

    On an exception the staging folder is removed and ``target`` is untouched; after a kill, the next call for the
    same ``target`` repairs and cleans (:func:`recover`).

    Raises
    ------
    ValueError
        Before any work, as :func:`check_replaceable` and :func:`check_writable` say; and at the end when files
        this package did not write appeared at ``target`` meanwhile.
    """
    target = Path(target)
    recover(target)
    check_replaceable(target, overwrite=overwrite)
    check_writable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(4)
    staging, retired = _staging_name(target, "partial", token), _staging_name(target, "old", token)
    staging.mkdir()
    try:
        yield staging
        marker = _marker(staging) or {"state": "complete"}
        mark(staging, marker["state"], marker.get("files"), writer)
        check_replaceable(target, overwrite=True)
        _replace(staging, target, retired)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        _raise_if_disk_full(error, target)
        raise
