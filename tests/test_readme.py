"""The README stays a newcomer's page: short, its example runs against the current API, its links lead somewhere,
and it points at nothing outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from bnn.inference import Posterior

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 150  # measured tables and internals go to benchmarks/results/ and docs/


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


def test_the_readme_is_short():
    assert len(README.splitlines()) <= MAX_LINES


def test_the_readme_opens_with_the_two_commands():
    first_block = re.search(r"^```bash\n(.*?)^```$", README, flags=re.S | re.M).group(1)
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_the_readme_example_runs(tmp_path, monkeypatch):
    """The example, as written, in a scratch folder (it saves a posterior under ``runs/``)."""
    (example,) = python_blocks(README)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BNN_PROGRESS", "0")
    namespace: dict = {"__name__": "readme_example"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the network is tiny; on a machine shared with other jobs, torch's threads contend
    try:
        exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    finally:
        torch.set_num_threads(threads)
    assert list(namespace["table"].index) == ["svi (meanfield)", "laplace"]
    assert (namespace["low"] < namespace["high"]).all()
    assert Posterior.load(tmp_path / "runs" / "toy-svi").method == "svi"


def test_the_readme_links_lead_to_files_of_the_repository():
    targets = [t for t in re.findall(r"\]\(([^)]+)\)", README) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing


def test_the_readmes_prose_holds_no_commit_date_or_wall_time():
    """Measured numbers live in benchmarks/results/, which name their runs; the README links to them."""
    prose = re.sub(r"^```.*?^```$", "", README, flags=re.S | re.M)
    assert re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", prose) == []  # commit hashes
    assert re.findall(r"\b20\d\d-\d\d-\d\d\b", prose) == []  # dates
    assert re.findall(r"\b\d+(?:\.\d+)? ?(?:s|min|minutes|seconds|h|hours)\b", prose) == []  # wall times


def test_the_readme_points_at_nothing_outside_the_repository():
    assert "../" not in README
