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

One writer per folder: from where a write's work begins until its swap, the writer holds an exclusive lock
(``fcntl.flock``) on ``.<name>.bnn-writing`` beside the target (:func:`writing`), which names its process id and
command; a second writer of the same target is refused at once, naming them. A writer that took no lock and changed
the target meanwhile is found at the swap: without ``overwrite`` the target keeps what that writer put there and this
write's result goes beside it, to ``<target>-<pid>``. The lock ends with its process (SIGKILL included), so none is
ever left to clear by hand.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import itertools
import json
import math
import numbers
import os
import secrets
import shlex
import shutil
import sys
import tempfile
import threading
import time
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
WRITING_SUFFIX = ".bnn-writing"
"""The lock file of a write in progress is ``.<name>.bnn-writing`` beside its target (:func:`writing`)."""
_LOCK_HELD = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
_NO_LOCK = (errno.EPERM, errno.EROFS, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL)
HOLDER_WAIT_SECONDS = 1.0
"""How long a refused writer waits for the lock's holder to have written its name into the lock file."""


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


def dangling_link(path: Path) -> Path | None:
    """``path`` or the nearest folder above it that is a symbolic link to nothing (a missing target, a loop), else
    ``None``: no folder can be made there."""
    return next((part for part in (path, *path.parents) if part.is_symlink() and not part.exists()), None)


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
    :func:`check_replaceable` first. Made while this thread writes ``folder`` (:func:`writing`), the change is the
    writer's own, which its swap does not take for another writer's.
    """
    folder = Path(folder)
    check_replaceable(folder, overwrite=True)
    folder.mkdir(parents=True, exist_ok=True)
    state = result_state(folder)
    if state is None:
        mark(folder, "checkpoint", [name])
    else:
        listed = json.loads((folder / MARKER).read_text())["files"]
        mark(folder, state, {*listed, name})
    held = _held_writes().get(_write_key(folder))
    if held is not None:
        held.state = _folder_state(folder)


def check_replaceable(target: str | Path, *, overwrite: bool) -> None:
    """Refuse a ``target`` that a write must not replace, before any work.

    Raises
    ------
    ValueError
        When ``target`` or a folder above it is a file or a symbolic link to nothing; when ``target`` is a symbolic
        link (the swap would replace the link); when ``target`` is a mount point (a rename cannot replace it:
        ``EBUSY`` after the work); when ``target`` holds entries this package did not write (:func:`result_state` is
        ``None``), whatever ``overwrite`` says; when it holds a result of ours and ``overwrite`` is false.
    """
    target = Path(target)
    blocking = blocking_file(target)
    if blocking is not None:
        below = "" if blocking == target else f", so the folder {target} cannot be made"
        raise ValueError(f"{blocking} is a file, not a folder{below}; choose another folder path")
    dangling = dangling_link(target)
    if dangling is not None:
        below = "" if dangling == target else f", so the folder {target} cannot be made"
        raise ValueError(f"{dangling} is a symbolic link to {os.readlink(dangling)}, which does not exist{below}; "
                         "choose another folder path")
    if target.is_symlink():
        raise ValueError(f"{target} is a symbolic link (to {os.readlink(target)}): a result is swapped in by renaming "
                         "a complete folder onto its path, which would replace the link, not fill the folder it points "
                         f"to; give that folder's own path ({target.resolve()}) or choose another folder path")
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
    its two renames (when ``target`` is missing), and remove the staging folders of writers that are gone and a lock
    file no process holds (:func:`writing`)."""
    target = Path(target)
    if not target.parent.is_dir():
        return
    _remove_unheld_lock(target)
    for old in _dead_staging(target, "old"):
        if not target.exists():
            os.replace(old, target)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for partial in _dead_staging(target, "partial"):
        shutil.rmtree(partial, ignore_errors=True)


def process_command() -> str:
    """How this process was started, quoted as a shell runs it again: ``bnn ...`` for the ``bnn`` launcher and
    ``python -m bnn``, else the Python interpreter and its arguments (a script, ``-c``)."""
    argv = sys.argv or [""]
    first = Path(argv[0])
    if first.name == "bnn" or (first.name == "__main__.py" and first.parent.name == "bnn"):
        return shlex.join(["bnn", *argv[1:]])
    return shlex.join([Path(sys.executable).name or "python", *(argv if argv[0] else argv[1:])])


class _Write:
    """A write lock this thread holds: its lock file's descriptor (``None`` where the file system takes no lock) and
    the state of the target the writer last saw (:func:`_folder_state`). A plain class: this module also runs loaded
    from its file alone, outside ``sys.modules``, where a dataclass cannot be made."""

    __slots__ = ("descriptor", "state")

    def __init__(self, descriptor: int | None, state: tuple | None) -> None:
        self.descriptor, self.state = descriptor, state


_writes = threading.local()


def _held_writes() -> dict[str, _Write]:
    """The write locks this thread holds, by :func:`_write_key`."""
    if not hasattr(_writes, "held"):
        _writes.held = {}
    return _writes.held


def _write_key(target: Path) -> str:
    """One name per target however it is spelled (relative, through a linked folder)."""
    return os.path.join(os.path.realpath(target.parent), target.name)


def writing_lock(target: str | Path) -> Path:
    """The lock file of a write of ``target``: ``.<name>.bnn-writing`` beside it."""
    target = Path(target)
    return target.parent / f".{target.name}{WRITING_SUFFIX}"


def _folder_state(target: Path) -> tuple | None:
    """What a write by another process changes at ``target``: the folder there (device, inode) and its marker
    (inode, modification time); ``None`` where there is none."""
    try:
        folder = os.lstat(target)
    except OSError:
        return None
    try:
        marker = os.stat(target / MARKER)
    except OSError:
        return folder.st_dev, folder.st_ino, None
    return folder.st_dev, folder.st_ino, (marker.st_ino, marker.st_mtime_ns)


def _names_file(path: Path, descriptor: int) -> bool:
    """Whether ``path`` names the file open as ``descriptor`` (not a file made after it was removed)."""
    try:
        named = os.stat(path)
    except OSError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _lock_holder(descriptor: int) -> dict | None:
    """The record (``pid``, ``command``, ``writer``, ``since``) in a lock file another process holds; it is written
    just after the lock is taken, so a missing record, or the one of a process that is gone, is read again for up to
    :data:`HOLDER_WAIT_SECONDS`."""
    deadline = time.monotonic() + HOLDER_WAIT_SECONDS
    while True:
        try:
            holder = json.loads(os.pread(descriptor, 1 << 16, 0))
            alive = isinstance(holder, dict) and _alive(int(holder["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            holder, alive = None, False
        if alive or time.monotonic() > deadline:
            return holder if isinstance(holder, dict) else None
        time.sleep(0.01)


def _busy(target: Path, holder: dict | None) -> ValueError:
    """The refusal of a second writer of ``target``, naming the process that writes it."""
    if holder is None:
        who = "another process"
    else:
        command, writer = str(holder.get("command")), str(holder.get("writer"))
        run = f"`{command}`" if command.startswith(writer) else f"{writer} in `{command}`"
        since = f", since {holder['since']}" if holder.get("since") else ""
        who = f"pid {holder.get('pid')} ({run}{since})"
    return ValueError(f"{target} is being written by {who}; wait for it, or choose another --out")


def _take_lock(target: Path, record: dict) -> int | None:
    """Take the write lock of ``target`` and write ``record`` into it; return the lock file's descriptor, or ``None``
    where the file system takes no lock there (the swap's check still guards the target).

    The standard protocol for a lock file its holder removes: after taking the lock, check that the path still names
    the file locked (its holder may have removed it meanwhile), else start again.
    """
    path = writing_lock(target)
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            if error.errno in (*_NO_LOCK, errno.EACCES):
                return None
            raise
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            try:
                if error.errno in _NO_LOCK:  # the file just made, empty: no writer ever held it
                    if _names_file(path, descriptor) and os.fstat(descriptor).st_size == 0:
                        path.unlink(missing_ok=True)
                    return None
                if error.errno not in _LOCK_HELD:
                    raise
                if _names_file(path, descriptor):
                    raise _busy(target, _lock_holder(descriptor)) from None
            finally:
                os.close(descriptor)
            continue  # its holder removed it as it finished: try again
        if _names_file(path, descriptor):
            os.ftruncate(descriptor, 0)
            os.write(descriptor, (json.dumps(record) + "\n").encode())
            return descriptor
        os.close(descriptor)


def _release_lock(target: Path, descriptor: int) -> None:
    """Remove the lock file while holding its lock (so that no other writer holds the file removed), then end it."""
    try:
        path = writing_lock(target)
        if _names_file(path, descriptor):
            path.unlink()
    finally:
        os.close(descriptor)


def _remove_unheld_lock(target: Path) -> None:
    """Remove the lock file of ``target`` that a killed writer left (no process holds its lock); one that is held,
    by another process or by this one, stays."""
    try:
        descriptor = os.open(writing_lock(target), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return
    _release_lock(target, descriptor)


@contextmanager
def writing(target: str | Path, *, writer: str, command: str | None = None) -> Iterator[None]:
    """Within the block this thread is the one writer of ``target``: it holds the exclusive lock on
    :func:`writing_lock` (``fcntl.flock``), which records this process's id, ``command`` (default: how this
    process was started, :func:`process_command`) and ``writer``. Re-entrant: a block inside another for the same
    target takes nothing more. The folders above ``target`` are made, and those made here removed at the end when
    they are empty. The lock ends with the process, however it ends.

    Raises
    ------
    ValueError
        At once, when another process (or thread) writes ``target``: naming its process id and command.
    """
    target = Path(target)
    key = _write_key(target)
    if key in _held_writes():
        yield
        return
    made = [folder for folder in itertools.takewhile(lambda folder: not folder.is_dir(), target.absolute().parents)]
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        record = {"pid": os.getpid(), "command": command or process_command(), "writer": writer,
                  "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        descriptor = _take_lock(target, record)
        _held_writes()[key] = _Write(descriptor, _folder_state(target))
        try:
            yield
        finally:
            del _held_writes()[key]
            if descriptor is not None:
                _release_lock(target, descriptor)
    finally:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break


def _keep_beside(staging: Path, target: Path) -> Path:
    """Move the complete folder ``staging`` to a new name beside ``target``, ``<target>-<pid>``; return it."""
    for attempt in itertools.count():
        beside = target.with_name(f"{target.name}-{os.getpid()}" + (f"-{attempt}" if attempt else ""))
        if not beside.exists() and not beside.is_symlink():
            os.rename(staging, beside)
            return beside
    raise AssertionError("unreachable")


def _swap_in(staging: Path, target: Path, retired: Path, overwrite: bool) -> None:
    """Put the complete ``staging`` at ``target``, unless another writer changed ``target`` since this write began
    (``overwrite`` false) or left files there that this package did not write: then ``target`` keeps what it holds,
    ``staging`` goes beside it (:func:`_keep_beside`) and a ``ValueError`` says where."""
    held = _held_writes()[_write_key(target)]
    if not overwrite and _folder_state(target) != held.state:
        beside = _keep_beside(staging, target)
        writer = marked_writer(target)
        what = "something" if writer is None else f"a result of `{writer}`"
        raise ValueError(f"{target} changed while this run wrote it: another process, which took no lock, put {what} "
                         f"there meanwhile, and it is kept; this run's result is in {beside}: compare the two and keep "
                         "the one you want, or pass --overwrite next time to replace it")
    try:
        check_replaceable(target, overwrite=True)
    except ValueError as error:
        beside = _keep_beside(staging, target)
        raise ValueError(f"{error}; this run's result is kept in {beside}") from None
    _replace(staging, target, retired)
    held.state = _folder_state(target)


@contextmanager
def atomic_directory(target: str | Path, *, writer: str, overwrite: bool = False,
                     command: str | None = None) -> Iterator[Path]:
    """Yield a fresh staging folder; on success it is marked (``complete`` unless the block called :func:`mark`) as
    written by ``writer`` (the command or call a user knows it by) and replaces ``target`` in one step.

    The whole write holds the lock of ``target`` (:func:`writing`; ``command`` is what a refused second writer is
    told, default :func:`process_command`). On an exception the staging folder is removed and ``target`` is
    untouched; after a kill, the next call for the same ``target`` repairs and cleans (:func:`recover`).

    Raises
    ------
    ValueError
        Before any work, as :func:`check_replaceable` and :func:`check_writable` say, and when another process
        writes ``target`` now. At the end, when another writer that took no lock changed ``target`` meanwhile (and
        ``overwrite`` is false) or left files there that this package did not write: ``target`` keeps them, and the
        message names the folder beside it, ``<target>-<pid>``, that holds this write's result.
    """
    target = Path(target)
    recover(target)
    check_replaceable(target, overwrite=True)
    check_writable(target)
    with writing(target, writer=writer, command=command):
        check_replaceable(target, overwrite=overwrite)
        token = secrets.token_hex(4)
        staging, retired = _staging_name(target, "partial", token), _staging_name(target, "old", token)
        staging.mkdir()
        try:
            yield staging
            marker = _marker(staging) or {"state": "complete"}
            mark(staging, marker["state"], marker.get("files"), writer)
            _swap_in(staging, target, retired, overwrite)
        except BaseException as error:
            shutil.rmtree(staging, ignore_errors=True)
            _raise_if_disk_full(error, target)
            raise
