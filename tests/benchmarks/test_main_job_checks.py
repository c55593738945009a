"""The main job's checks over seeds: one row per method and seed, and how many seeds each method passed."""

from __future__ import annotations

import re

import pytest

from benchmarks import main_job_checks

pytestmark = pytest.mark.benchmarks


def test_prints_each_methods_verdict_per_seed_and_the_count(capsys):
    passed = main_job_checks.main(["--seeds", "0-1", "--", "--methods", "svi,laplace", "--hidden", "3", "--steps", "120",
                                   "--map-steps", "30"])
    printed = capsys.readouterr().out.splitlines()
    rows = [line for line in printed if re.match(r"\| (svi|laplace) \|", line)]
    assert [row.split(" | ")[:2] for row in rows] == [["| svi", "0"], ["| laplace", "0"], ["| svi", "1"], ["| laplace", "1"]]
    # 120 steps: the ELBO still climbs, and SVI's check says so on both seeds
    assert all(re.fullmatch(r"\| svi \| \d \| no \| ELBO gain [\d.]+ nats over the last 50 steps, [\d.]+ standard errors, "
                            r"settling allowance [\d.]+ \| \d+ \|", row) for row in rows[::2]), rows
    assert all(re.fullmatch(r"\| laplace \| \d \| (yes|no) \| MAP converged: (True|False) \| \d+ \|", row)
               for row in rows[1::2]), rows
    assert passed["svi"] == 0 and f"laplace: {passed['laplace']} of 2 seeds passed its own check" in printed
