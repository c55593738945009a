"""The JIT benchmark runs end to end: a fit per length, setting and repeat, and the table of their medians."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks import svi_jit

pytestmark = pytest.mark.benchmarks


def test_a_short_run_writes_every_time_and_the_table_of_medians(tmp_path):
    csv = tmp_path / "times.csv"
    frame = svi_jit.main(["--problems", "toy1d", "--steps", "2", "3", "--repeats", "1", "--csv", str(csv)])
    saved = pd.read_csv(csv)
    assert saved[["problem", "steps", "jit", "repeat"]].values.tolist() == [
        ["toy1d", 2, True, 0], ["toy1d", 2, False, 0], ["toy1d", 3, True, 0], ["toy1d", 3, False, 0]]
    assert (saved["seconds"] > 0).all() and saved["seconds"].tolist() == pytest.approx(frame["seconds"].tolist())
    table = svi_jit.tables_from_csv(csv)
    on, off = saved["seconds"][2], saved["seconds"][3]
    assert f"| toy1d | 3 | {on:.2f} | {off:.2f} | {on / off:.2f} |" in table
    assert "- run: `python -m benchmarks.svi_jit --problems toy1d" in table
