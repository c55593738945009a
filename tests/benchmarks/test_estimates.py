"""The estimates benchmark estimates each cell's fit, runs it and prints one row per fit: its estimate, the worst
case, the fit's wall time and their ratio."""

from __future__ import annotations

import pytest

from benchmarks import estimates
from tests.benchmarks.test_laplace_uci import tiny_uci

pytestmark = pytest.mark.benchmarks


def test_each_fit_is_estimated_then_timed_and_the_row_says_both(tmp_path, capsys):
    uci = tiny_uci(tmp_path / "uci")
    rows = estimates.main(["--methods", "laplace", "--cells", "yacht:0", "--uci-dir", str(uci), "--relu"])
    [row] = rows
    assert (row["method"], row["cell"], row["network"], row["how counted"]) == ("laplace", "yacht:0", "ReLU (bnn uci)",
                                                                                "expected")
    assert 0 < row["estimate s"] <= row["at most s"] and row["fit s"] > 0 and row["fit / estimate"] > 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| method | cell |") and printed[2].startswith("| laplace | yacht:0 | ReLU (bnn uci) |")
    with pytest.raises(SystemExit, match="needs --uci-dir"):
        estimates.main(["--methods", "map", "--cells", "yacht:0"])
