"""Where a benchmark's numbers came from, and the two files it leaves: the command, the commit, the machine and
the date in a header, every number in ``results.json`` and its tables in ``results.md``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path


def commit() -> str:
    """The checkout's short commit hash, or ``"unknown"`` outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_header(module: str, argv: list[str] | None) -> dict[str, str]:
    """The command (``python -m module`` and its arguments: ``argv``, or the process's own), commit, machine, date."""
    return {"command": " ".join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)]),
            "commit": commit(), "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores)",
            "date": datetime.now(UTC).date().isoformat()}


def printed_rows(rows: Iterable[dict]) -> list[dict]:
    """The rows, each printed as a JSON line as it comes (a long run shows its progress)."""
    kept = []
    for row in rows:
        kept.append(row)
        print(json.dumps(row), flush=True)
    return kept


def write_results(out: Path, results: dict, markdown: str) -> None:
    """``results.json`` and ``results.md`` into ``out`` (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown)
