"""Result folders never lose anything: kills at random moments, foreign folders, dead writers' leftovers."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bnn.runtime import atomic
from bnn.runtime.atomic import (
    MARKER,
    atomic_directory,
    atomic_file,
    check_apart,
    check_replaceable,
    check_writable,
    claim_entry,
    mark,
    marked_writer,
    recover,
    result_state,
    write_json,
    writing,
    writing_lock,
)

FILES = ("a.txt", "b.txt", "c.txt")
WRITER = f"""
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
if sys.argv[3] == "two-renames":
    atomic._exchange = lambda first, second: False
print("ready", flush=True)
generation = 1
while True:
    with atomic.atomic_directory(sys.argv[2], writer="test", overwrite=True) as staging:
        for name in {FILES!r}:
            (staging / name).write_text(f"{{generation}} " * 2000)
        (staging / "sub").mkdir()
        (staging / "sub" / "d.txt").write_text(str(generation))
    generation += 1
"""
"""A process that overwrites one result folder again and again, each generation's files holding its number (loaded
from the file, without the package, so that it starts in milliseconds)."""


def write_generation(target: Path, generation: int) -> None:
    with atomic_directory(target, writer="test", overwrite=True) as staging:
        for name in FILES:
            (staging / name).write_text(f"{generation} " * 2000)
        (staging / "sub").mkdir()
        (staging / "sub" / "d.txt").write_text(str(generation))


def complete_generation(target: Path) -> int:
    """The generation a result folder holds; fails unless it is one whole generation."""
    assert result_state(target) == "complete", sorted(p.name for p in target.parent.iterdir())
    assert {p.name for p in target.iterdir()} == {*FILES, "sub", MARKER}
    generations = {(target / name).read_text() for name in FILES}
    assert len(generations) == 1
    generation = int(generations.pop().split()[0])
    assert (target / "sub" / "d.txt").read_text() == str(generation)
    return generation


def dead_pid() -> int:
    """The process id of a process that has ended."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)


def kill_a_writer(tmp_path: Path, delay: float, mode: str) -> None:
    """SIGKILL the writer ``delay`` seconds after it is ready, then check the folder (repaired first for two renames)."""
    target = tmp_path / "result"
    if not target.exists():
        write_generation(target, 0)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, atomic.__file__, str(target), mode], stdout=subprocess.PIPE)
    assert writer.stdout.readline() == b"ready\n"
    time.sleep(delay)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    if mode == "two-renames":
        recover(target)  # a kill between the two renames leaves the old folder aside: the next write puts it back
    complete_generation(target)
    recover(target)
    assert [p.name for p in tmp_path.iterdir()] == ["result"]  # the dead writer's staging folders are gone
    complete_generation(target)


@pytest.mark.subprocess
@settings(max_examples=30, deadline=None, derandomize=True)
@given(delay=st.floats(0, 0.03), mode=st.sampled_from(["exchange", "two-renames"]))
def test_a_killed_overwrite_leaves_the_old_or_the_new_result(tmp_path_factory, delay, mode):
    kill_a_writer(tmp_path_factory.mktemp("kill"), delay, mode)


@pytest.mark.subprocess
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(delay=st.floats(0, 0.1), mode=st.sampled_from(["exchange", "two-renames"]))
def test_many_killed_overwrites_leave_the_old_or_the_new_result(tmp_path_factory, delay, mode):
    kill_a_writer(tmp_path_factory.mktemp("kill"), delay, mode)


def test_the_swap_is_one_exchange_on_linux(tmp_path):
    if sys.platform != "linux":
        pytest.skip("renameat2 is Linux's")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    assert atomic._exchange(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b" / "x").read_text() == "a" and not any((tmp_path / "a").iterdir())


@pytest.mark.subprocess
def test_only_dead_writers_staging_folders_are_removed(tmp_path):
    target = tmp_path / "result"
    write_generation(target, 1)
    dead = dead_pid()
    mine, theirs = target.with_name(f".result.partial-{os.getpid()}-aa"), target.with_name(f".result.partial-{dead}-bb")
    other = target.with_name(f".other.partial-{dead}-cc")
    for folder in (mine, theirs, other):
        folder.mkdir()
    recover(target)
    assert mine.exists() and not theirs.exists() and other.exists()  # a live writer's, and another target's, stay


@pytest.mark.subprocess
def test_an_old_folder_moved_aside_by_a_killed_writer_comes_back(tmp_path):
    target = tmp_path / "result"
    write_generation(target, 4)
    os.replace(target, target.with_name(f".result.old-{dead_pid()}-aa"))
    write_generation(target, 5)  # the next write repairs first, then replaces the old result
    assert complete_generation(target) == 5 and [p.name for p in tmp_path.iterdir()] == ["result"]


@pytest.mark.parametrize("stranger", ["notes.txt", "data", MARKER])
def test_a_folder_with_files_we_did_not_write_is_never_replaced(tmp_path, stranger):
    target = tmp_path / "result"
    write_generation(target, 1)
    if stranger == MARKER:
        (target / MARKER).write_text("not json")
    else:
        (target / stranger).write_text("mine")
    with pytest.raises(ValueError, match="holds files this tool did not write .*choose another folder"):
        write_generation(target, 2)
    assert (target / "a.txt").read_text().startswith("1")


def test_a_full_disk_is_one_clear_error_and_the_old_result_stays(tmp_path):
    target = tmp_path / "result"
    write_generation(target, 1)
    with pytest.raises(ValueError, match=f"the disk that holds {target} is full \\(No space left on device\\); {target} "
                                         "holds what it held before: free space there or choose another --out"):
        with atomic_directory(target, writer="test", overwrite=True) as staging:
            (staging / "a.txt").write_text("2")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert complete_generation(target) == 1
    assert [path.name for path in tmp_path.iterdir()] == ["result"]  # no staging folder left


def test_a_full_disk_while_writing_a_file_is_one_clear_error_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "split-0.json"
    write_json(path, {"kept": 1})
    with pytest.raises(ValueError, match=f"the disk that holds {path} is full"):
        with atomic_file(path) as handle:
            handle.write("{")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert [p.name for p in tmp_path.iterdir()] == ["split-0.json"] and json.loads(path.read_text()) == {"kept": 1}


def test_too_little_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda folder: type("usage", (), {"free": 3 * 2**20})())
    atomic.check_free_space(tmp_path, 2**20, "a result")  # 1 MiB and the margin fit in 3 MiB
    with pytest.raises(ValueError, match=f"a result needs about 3.0 MiB in {tmp_path}, and its file system has 3.0 MiB "
                                         "free: free space there or choose another --out"):
        atomic.check_free_space(tmp_path, 2 * 2**20 + 1, "a result")


def test_a_mount_point_is_refused_before_any_work(tmp_path, monkeypatch):
    # an empty read-only mount given as --out --overwrite: the rename that swaps the result in fails with EBUSY
    mount = tmp_path / "mount"
    mount.mkdir()
    monkeypatch.setattr("os.path.ismount", lambda path: Path(path) == mount)
    worked = []
    with pytest.raises(ValueError, match=f"{mount} is a mount point: .*choose a folder inside it, such as {mount / 'run'}"):
        with atomic_directory(mount, writer="test", overwrite=True):
            worked.append(True)
    assert worked == [] and list(mount.iterdir()) == []


def test_overwrite_replaces_only_a_result_of_ours_and_only_when_asked(tmp_path):
    target = tmp_path / "result"
    check_replaceable(target, overwrite=False)  # absent: fine
    target.mkdir()
    check_replaceable(target, overwrite=False)  # empty: fine
    write_generation(target, 1)
    with pytest.raises(ValueError, match=re.escape("holds a result of `test`; choose another folder or pass "
                                                   "overwrite=True (--overwrite) to replace it")):
        check_replaceable(target, overwrite=False)
    write_generation(target, 2)
    assert complete_generation(target) == 2


def test_the_marker_names_its_writer_and_a_stopped_mark_keeps_it(tmp_path):
    with atomic_directory(tmp_path / "stopped", writer="bnn fit") as staging:
        (staging / "metrics.json").write_text("{}")
        mark(staging, "stopped")
    marker = json.loads((tmp_path / "stopped" / MARKER).read_text())
    assert marker == {"written_by": "bnn", "state": "stopped", "files": ["metrics.json"], "writer": "bnn fit"}
    claim_entry(tmp_path / "stopped", "checkpoint")
    assert marked_writer(tmp_path / "stopped") == "bnn fit" and result_state(tmp_path / "stopped") == "stopped"


def test_a_marker_from_before_writers_were_named_is_still_ours(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "fit.json").write_text("{}")
    (tmp_path / "old" / MARKER).write_text(json.dumps({"written_by": "bnn", "state": "complete", "files": ["fit.json"]}))
    assert result_state(tmp_path / "old") == "complete" and marked_writer(tmp_path / "old") is None
    with pytest.raises(ValueError, match="old exists and is not empty; choose another folder or pass overwrite=True"):
        check_replaceable(tmp_path / "old", overwrite=False)
    with atomic_directory(tmp_path / "old", writer="Posterior.save", overwrite=True):
        pass
    assert marked_writer(tmp_path / "old") == "Posterior.save"


def test_a_failed_write_leaves_the_old_result_and_no_staging(tmp_path):
    target = tmp_path / "result"
    write_generation(target, 1)
    with pytest.raises(RuntimeError), atomic_directory(target, writer="test", overwrite=True) as staging:
        (staging / "a.txt").write_text("half")
        raise RuntimeError
    assert complete_generation(target) == 1 and [p.name for p in tmp_path.iterdir()] == ["result"]


def test_a_claimed_checkpoint_folder_is_ours_and_keeps_the_state(tmp_path):
    run = tmp_path / "run"
    claim_entry(run, "checkpoint")
    (run / "checkpoint").mkdir()
    assert result_state(run) == "checkpoint"
    write_generation(run, 1)
    claim_entry(run, "checkpoint")
    (run / "checkpoint").mkdir()
    assert result_state(run) == "complete"
    assert json.loads((run / MARKER).read_text())["files"] == sorted([*FILES, "sub", "checkpoint"])


@pytest.mark.parametrize("where", ["/proc/bnn-run", "/proc/self/bnn-run", "/sys/bnn/run"])
def test_an_unwritable_place_is_refused_before_any_work(where):
    with pytest.raises(ValueError, match="cannot write into /(proc|sys).*choose an --out in a folder you can write"):
        check_writable(where)


@pytest.mark.parametrize("relation", ["is", "contains", "lies inside"])
def test_an_out_folder_must_keep_apart_from_the_inputs(tmp_path, relation):
    data = tmp_path / "uci"
    out = {"is": data, "contains": tmp_path, "lies inside": data / "yacht" / "run"}[relation]
    with pytest.raises(ValueError, match=f"--out {out} {relation} the --uci-dir folder {data}, an input"):
        check_apart(out, {"--resume": None, "--uci-dir": data})
    check_apart(tmp_path / "run", {"--uci-dir": data})


@pytest.mark.parametrize("folder", [Path("."), Path(".."), Path.home(), Path("/")])
def test_the_current_and_home_folders_and_the_root_are_never_an_out(folder):
    with pytest.raises(ValueError, match="is never replaced; choose a folder of its own"):
        check_apart(folder, {})


# ------------------------------------------------------------------ one writer per folder (issue 72, item 2)


def test_a_second_writer_is_refused_naming_the_first_and_the_first_result_stays(tmp_path):
    target, inside, finish = tmp_path / "result", threading.Event(), threading.Event()
    first_command = f"bnn fit --method ensemble --out {target}"

    def first() -> None:
        with atomic_directory(target, writer="bnn fit", command=first_command) as staging:
            for name in FILES:
                (staging / name).write_text("first " * 10)
            (staging / "sub").mkdir()
            (staging / "sub" / "d.txt").write_text("first")
            inside.set()
            assert finish.wait(60)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(60)
        lock = json.loads(writing_lock(target).read_text())
        assert lock["pid"] == os.getpid() and lock["command"] == first_command
        for overwrite in (False, True):
            with pytest.raises(ValueError, match=re.escape(f"{target} is being written by pid {os.getpid()} "
                                                           f"(`{first_command}`, since ") + r".*\); wait for it, or "
                                                 "choose another --out"):
                with atomic_directory(target, writer="bnn fit", overwrite=overwrite,
                                      command=f"bnn fit --method map --out {target}"):
                    raise AssertionError("the second writer started its work")
    finally:
        finish.set()
        thread.join()
    assert (target / "sub" / "d.txt").read_text() == "first" and marked_writer(target) == "bnn fit"
    assert [p.name for p in tmp_path.iterdir()] == ["result"]  # no staging folder, no lock file left


def test_a_write_inside_the_same_write_takes_no_second_lock(tmp_path):
    target = tmp_path / "report"
    with writing(target, writer="bnn compare", command="bnn compare --out report"):
        lock = writing_lock(target).read_text()
        write_generation(target, 1)  # the report's atomic write inside the comparison's lock
        assert writing_lock(target).read_text() == lock
    assert complete_generation(target) == 1 and not writing_lock(target).exists()


def test_a_writer_without_the_lock_that_finishes_meanwhile_keeps_its_result_and_this_one_goes_beside(tmp_path):
    target, other = tmp_path / "result", tmp_path / "other"
    with pytest.raises(ValueError) as refusal:
        with atomic_directory(target, writer="test") as staging:
            for name in FILES:
                (staging / name).write_text("1 " * 10)
            (staging / "sub").mkdir()
            (staging / "sub" / "d.txt").write_text("1")
            write_generation(other, 2)  # an older writer, which takes no lock, swaps its result in meanwhile
            os.rename(other, target)
    beside = tmp_path / f"result-{os.getpid()}"
    assert f"{target} changed while this run wrote it" in str(refusal.value) and str(beside) in str(refusal.value)
    assert complete_generation(target) == 2 and complete_generation(beside) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result", beside.name]


def test_files_a_user_put_at_the_target_meanwhile_stay_and_this_result_goes_beside(tmp_path):
    target = tmp_path / "result"
    with pytest.raises(ValueError, match=f"holds files this tool did not write .*; this run's result is kept in "
                                         f"{tmp_path / f'result-{os.getpid()}'}"):
        with atomic_directory(target, writer="test", overwrite=True) as staging:
            (staging / "a.txt").write_text("ours")
            target.mkdir()
            (target / "notes.txt").write_text("mine")
    assert (target / "notes.txt").read_text() == "mine"
    assert (tmp_path / f"result-{os.getpid()}" / "a.txt").read_text() == "ours"


@pytest.mark.parametrize("link", ["dangling", "loop", "to a folder", "above"])
def test_a_symbolic_link_out_is_refused_before_any_work_and_left_as_it_was(tmp_path, link):
    (tmp_path / "real").mkdir()
    names = {"dangling": ("out", "nowhere"), "loop": ("out", "out"), "to a folder": ("out", "real"),
             "above": ("gone", "nowhere")}
    name, points_to = names[link]
    os.symlink(points_to, tmp_path / name)
    target = tmp_path / "out" if link != "above" else tmp_path / "gone" / "run"
    expected = "is a symbolic link \\(to real\\): a result is swapped in by renaming" if link == "to a folder" else \
        f"is a symbolic link to {points_to}, which does not exist"
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=expected):
            with atomic_directory(target, writer="test", overwrite=overwrite):
                raise AssertionError("the work started")
    assert os.readlink(tmp_path / name) == points_to
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({name, "real"})


HOLDER = """
import sys, time
from bnn.runtime.atomic import writing
with writing(sys.argv[1], writer="bnn fit", command="bnn fit --out " + sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.mark.subprocess
def test_a_lock_left_by_a_killed_writer_does_not_block(tmp_path):
    target = tmp_path / "result"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(ValueError, match=re.escape(f"is being written by pid {holder.pid} (`bnn fit --out {target}`")):
            write_generation(target, 1)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert writing_lock(target).exists()  # its lock file stays, but no process holds its lock
    write_generation(target, 2)
    assert complete_generation(target) == 2 and [p.name for p in tmp_path.iterdir()] == ["result"]


def test_where_the_file_system_takes_no_lock_the_write_goes_on(tmp_path, monkeypatch):
    def no_lock(descriptor, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(atomic.fcntl, "flock", no_lock)
    write_generation(tmp_path / "result", 1)
    assert complete_generation(tmp_path / "result") == 1 and [p.name for p in tmp_path.iterdir()] == ["result"]


def test_a_write_that_ends_in_an_error_removes_the_folders_it_made_for_its_lock(tmp_path):
    target = tmp_path / "a" / "b" / "result"
    with pytest.raises(KeyError):
        with writing(target, writer="test"):
            assert writing_lock(target).is_file()
            raise KeyError("refused")
    assert list(tmp_path.iterdir()) == []
