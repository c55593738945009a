"""A resumable run's folder (``bnn uci``, ``bnn continual``): written into in place as the run goes, by one run at a time.

Such a folder holds :data:`~bnn.runtime.atomic.MARKER` with the state :data:`~bnn.runtime.atomic.RUN_STATE` and the
``writer`` that owns it (``"uci"``, ``"continual"``). Before any work a run checks its folder (:func:`check_run_folder`):
it must be new, empty, or its own writer's (the marker names the writer and every entry is one that writer makes);
anything else is refused, whatever the options say: another command's run, a result of ``bnn fit`` or ``bnn compare``,
files this package did not write. No atomic write of a fit replaces a run folder either
(:func:`~bnn.runtime.atomic.check_replaceable` names its writer).

While it writes, a run holds an exclusive lock (``fcntl.flock``) on :data:`LOCK_FILE` in the folder
(:func:`locked_run_folder`): a second run of the same folder is refused at once, naming the process that holds it,
instead of both writing and one run's numbers ending under the other's settings. The operating system ends the lock
with the process, however it ends (a crash, SIGKILL), so no stale lock is ever left to clear by hand.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bnn.runtime.atomic import (
    MARKER,
    RUN_STATE,
    blocking_file,
    check_writable,
    dangling_link,
    result_state,
    run_writer,
    write_json,
)

LOCK_FILE = ".bnn-lock"
"""The file a writing run locks; it holds the process id of the last run that held the lock."""


def check_run_folder(folder: str | Path, writer: str, entries: set[str], *,
                     unmarked_run: Callable[[Path], bool] = lambda folder: False) -> None:
    """Refuse, before any work, a ``folder`` that a run of ``writer`` must not write into.

    Parameters
    ----------
    folder : str or Path
        The run's folder.
    writer : str
        The command that runs (``"uci"``).
    entries : set of str
        The names a run of ``writer`` makes in its folder (the marker and the lock file aside).
    unmarked_run : callable, optional
        ``unmarked_run(folder)``: whether an unmarked folder is a run of ``writer`` made before runs were marked (its
        own files alone); such a folder is accepted and marked.

    Raises
    ------
    ValueError
        When ``folder`` or a folder above it is a file or a symbolic link to nothing; when it holds another
        writer's run, a result of a fit or a comparison, or files this package did not write; when it cannot be
        written.
    """
    folder = Path(folder)
    blocking = blocking_file(folder)
    if blocking is not None:
        raise ValueError(f"{blocking} is a file, not a folder; choose another --out")
    dangling = dangling_link(folder)
    if dangling is not None:
        raise ValueError(f"{dangling} is a symbolic link to {os.readlink(dangling)}, which does not exist; choose another "
                         "--out")
    check_writable(folder / LOCK_FILE)
    if not folder.exists() or not any(folder.iterdir()):
        return
    found = {path.name for path in folder.iterdir()} - {MARKER, LOCK_FILE}
    owner = run_writer(folder)
    if owner == writer and found <= entries:
        return
    if owner is not None and owner != writer:
        raise ValueError(f"{folder} holds a run of `bnn {owner}` (its {MARKER} says so); `bnn {writer}` writes only into "
                         f"a new or empty folder or a run of its own: choose another --out")
    if owner is None and not (folder / MARKER).exists() and found <= entries and unmarked_run(folder):
        return
    if result_state(folder) is not None:
        raise ValueError(f"{folder} holds a result of `bnn fit` or `bnn compare` (its {MARKER} says so); `bnn {writer}` "
                         "writes only into a new or empty folder or a run of its own: choose another --out")
    stranger = sorted(found - entries) or sorted(found)
    raise ValueError(f"{folder} holds files `bnn {writer}` did not write ({', '.join(stranger[:3])}"
                     f"{', ...' if len(stranger) > 3 else ''}); it writes only into a new or empty folder or a run of its "
                     "own, so nothing there is touched: choose another --out")


@contextmanager
def locked_run_folder(folder: str | Path, writer: str, entries: set[str]) -> Iterator[Path]:
    """Within the block, ``folder`` (checked before by :func:`check_run_folder`) exists, is marked as a run of
    ``writer`` and is locked by this process.

    Raises
    ------
    ValueError
        When another process holds the lock: another run is writing into ``folder`` now.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            lock.seek(0)
            holder = lock.read().strip()
            raise ValueError(f"another run (process {holder or 'unknown'}) is writing into {folder} now; wait until it "
                             f"ends, or choose another --out") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        if run_writer(folder) != writer:
            write_json(folder / MARKER, {"written_by": "bnn", "writer": writer, "state": RUN_STATE,
                                         "files": sorted(entries)})
        yield folder
