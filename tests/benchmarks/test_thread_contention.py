"""The thread-contention benchmark runs a command alone and as a pair, per setting, and prints one row each."""

from __future__ import annotations

import re
import sys

import pytest

from benchmarks import thread_contention

pytestmark = pytest.mark.benchmarks

# a command that takes the benchmark's --quiet --out DIR --overwrite and does nothing with them
NOTHING = [sys.executable, "-c", "pass"]


def test_settings_become_the_environment():
    environment = thread_contention.environment_of("OMP_NUM_THREADS=1, MKL_NUM_THREADS=2")
    assert (environment["OMP_NUM_THREADS"], environment["MKL_NUM_THREADS"]) == ("1", "2")


def test_prints_one_row_per_setting(capsys, tmp_path):
    thread_contention.main(["--settings", "OMP_NUM_THREADS=2; ", "--repeats", "1", "--csv", str(tmp_path / "rows.csv"),
                            "--", *NOTHING])
    printed = capsys.readouterr().out
    assert thread_contention.tables_from_csv(tmp_path / "rows.csv") == printed  # the table again, from the CSV alone
    rows = printed.splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| OMP_NUM_THREADS=2", "| (library default)"]
    assert all(re.fullmatch(r"\| .* \| \d+\.\d \| \d+\.\d \| \d+\.\d\d \|", row) for row in rows), rows


def test_a_failing_command_is_an_error_with_its_output():
    with pytest.raises(RuntimeError, match="no such option"):
        thread_contention.main(["--settings", "", "--repeats", "1", "--", sys.executable, "-c",
                                "import sys; sys.exit('no such option')"])
