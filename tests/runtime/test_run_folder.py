from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from bnn.runtime.atomic import MARKER, atomic_directory, check_replaceable
from bnn.runtime.run_folder import LOCK_FILE, check_run_folder, locked_run_folder

ENTRIES = {"cells", "results.csv"}


def test_a_new_or_empty_folder_or_the_writers_own_run_is_accepted(tmp_path):
    check_run_folder(tmp_path / "new", "uci", ENTRIES)
    (tmp_path / "empty").mkdir()
    check_run_folder(tmp_path / "empty", "uci", ENTRIES)
    with locked_run_folder(tmp_path / "run", "uci", ENTRIES):
        (tmp_path / "run" / "cells").mkdir()
    assert json.loads((tmp_path / "run" / MARKER).read_text()) == {
        "written_by": "bnn", "writer": "uci", "state": "run", "files": ["cells", "results.csv"]}
    check_run_folder(tmp_path / "run", "uci", ENTRIES)


@pytest.mark.parametrize("occupant, message", [
    ("notes.txt", r"holds files `bnn uci` did not write \(notes.txt\)"),
    ("results.csv", r"holds files `bnn uci` did not write \(results.csv\)"),  # an unmarked folder of the user's
])
def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path, occupant, message):
    (tmp_path / occupant).write_text("mine")
    with pytest.raises(ValueError, match=message + ".*choose another --out"):
        check_run_folder(tmp_path, "uci", ENTRIES)
    assert [path.name for path in tmp_path.iterdir()] == [occupant]


def test_an_unmarked_folder_is_accepted_only_as_the_writers_earlier_run(tmp_path):
    (tmp_path / "cells").mkdir()
    with pytest.raises(ValueError, match="did not write"):
        check_run_folder(tmp_path, "uci", ENTRIES)
    check_run_folder(tmp_path, "uci", ENTRIES, unmarked_run=lambda folder: (folder / "cells").is_dir())


def test_commands_never_write_into_each_others_folders(tmp_path):
    with locked_run_folder(tmp_path / "run", "continual", {"run.json"}):
        pass
    with pytest.raises(ValueError, match="run holds a run of `bnn continual` .*; `bnn uci` writes only into"):
        check_run_folder(tmp_path / "run", "uci", ENTRIES)
    with pytest.raises(ValueError, match="run holds a run of `bnn continual` .*which only that command writes into"):
        check_replaceable(tmp_path / "run", overwrite=True)
    with atomic_directory(tmp_path / "fitted", writer="bnn fit") as staging:
        (staging / "fit.json").write_text("{}")
    with pytest.raises(ValueError, match="fitted holds a result of `bnn fit` or `bnn compare`"):
        check_run_folder(tmp_path / "fitted", "uci", ENTRIES)


@pytest.mark.parametrize("out", ["file", "file/run"])
def test_a_folder_that_is_or_lies_under_a_file_is_refused(tmp_path, out):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ValueError, match="file is a file, not a folder; choose another --out"):
        check_run_folder(tmp_path / out, "uci", ENTRIES)


@pytest.mark.parametrize("out", ["link", "link/run"])
def test_a_folder_that_is_or_lies_under_a_link_to_nothing_is_refused_and_the_link_left(tmp_path, out):
    os.symlink("nowhere", tmp_path / "link")
    with pytest.raises(ValueError, match="link is a symbolic link to nowhere, which does not exist; choose another --out"):
        check_run_folder(tmp_path / out, "uci", ENTRIES)
    assert os.readlink(tmp_path / "link") == "nowhere" and [p.name for p in tmp_path.iterdir()] == ["link"]


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    with locked_run_folder(tmp_path, "uci", ENTRIES):
        with pytest.raises(ValueError, match=f"another run \\(process {os.getpid()}\\) is writing into {tmp_path} now"):
            with locked_run_folder(tmp_path, "uci", ENTRIES):
                pass
    with locked_run_folder(tmp_path, "uci", ENTRIES):  # released at the end of the first
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"


@pytest.mark.subprocess
def test_the_lock_ends_with_a_killed_writer(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom bnn.runtime.run_folder import locked_run_folder\n"
         f"with locked_run_folder({str(tmp_path)!r}, 'uci', set()):\n    print('locked', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(ValueError, match=f"another run \\(process {holder.pid}\\) is writing"):
            with locked_run_folder(tmp_path, "uci", ENTRIES):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with locked_run_folder(tmp_path, "uci", ENTRIES):  # no stale lock to clear by hand
        pass
