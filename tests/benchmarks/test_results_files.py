"""The results files read as results: each names the runs that made its numbers, holds the tables its script makes
again from the committed data alone, and keeps its reading short; uci.md and the folder's top-level files within their
line limits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import results_tables

RESULTS = results_tables.RESULTS
TOP_LEVEL = sorted(path for path in RESULTS.glob("*.md") if path.name != "README.md")
RESULTS_FILES = TOP_LEVEL + sorted(path for path in RESULTS.glob("*/**/*.md") if "baselines" not in path.parts)
"""Every results file: the top-level ones and those in folders (``bnn compare``'s reports under baselines/ are the
runs' own output, not results files)."""
RUN_LINE = re.compile(r"^- run: .*`[^`]+`.* at (?:[0-9a-f]{7}|unknown)\b.* on .+(?:\d{4}-\d{2}-\d{2}|unknown)", re.M)
UCI_LIMIT, TOTAL_LIMIT, READING_LIMIT = 250, 2500, 30


def name_of(path: Path) -> str:
    return path.relative_to(RESULTS).with_suffix("").as_posix()


@pytest.mark.parametrize("name", sorted(results_tables.SOURCES))
def test_the_tables_are_those_the_committed_data_make(name):
    text = (RESULTS / f"{name}.md").read_text()
    made = results_tables.tables(name)
    assert made in text
    assert results_tables.expected(name, text) == text  # and exactly where the file says they are made


def test_every_top_level_results_file_has_its_tables_made_from_data():
    assert {name_of(path) for path in TOP_LEVEL} <= set(results_tables.SOURCES)


@pytest.mark.parametrize("path", RESULTS_FILES, ids=name_of)
def test_each_file_names_a_run_its_command_commit_and_date(path):
    assert RUN_LINE.search(path.read_text()), f"{name_of(path)}: no '- run: `COMMAND` at COMMIT on MACHINE, DATE' line"


@pytest.mark.parametrize("path", RESULTS_FILES, ids=name_of)
def test_a_reading_is_at_most_thirty_lines(path):
    _, _, reading = path.read_text().partition("\n## Reading\n")
    assert len(reading.strip().splitlines()) <= READING_LIMIT
    if path in TOP_LEVEL:
        assert reading.strip(), f"{name_of(path)} has no reading"


def test_the_line_limits():
    assert len((RESULTS / "uci.md").read_text().splitlines()) <= UCI_LIMIT
    assert sum(len(path.read_text().splitlines()) for path in RESULTS.glob("*.md")) <= TOTAL_LIMIT


def test_the_index_lists_every_top_level_file():
    index = (RESULTS / "README.md").read_text()
    assert all(f"]({path.name})" in index for path in TOP_LEVEL)


def test_a_file_whose_tables_differ_from_its_data_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results_tables, "RESULTS", tmp_path)
    (tmp_path / "threads").mkdir()
    for path in ("threads.md", "threads/contention.csv", "threads/main_jobs.csv", "threads/mnist1d_cnn.csv"):
        (tmp_path / path).write_text((RESULTS / path).read_text())
    assert results_tables.main(["threads", "--check"]) == []
    table = tmp_path / "threads/contention.csv"
    table.write_text(table.read_text().replace("122.4", "122.5"))
    with pytest.raises(SystemExit):
        results_tables.main(["threads", "--check"])
    assert "threads" in capsys.readouterr().err
    results_tables.main(["threads", "--write"])
    assert "| OMP_NUM_THREADS=2 | 28.9 | 122.5 | 4.23 |" in (tmp_path / "threads.md").read_text()
