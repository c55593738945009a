"""benchmarks/map_check.py: the verdict at the current lines and the tables made from the CSV."""

import pandas as pd
from bnn.inference.core.objective_trend import FLAT_SHARE
from bnn.inference.map_search.gradient_noise import NOISE_RATIO

from benchmarks import map_check


def test_a_fit_passes_only_below_both_lines():
    """Each half fails a fit on its own; the CSV's ``converged`` (the verdict at the run's lines) is not read."""
    rows = pd.DataFrame({"share": [FLAT_SHARE, FLAT_SHARE * 1.01, FLAT_SHARE / 2, FLAT_SHARE / 2],
                         "noise_ratio": [NOISE_RATIO, NOISE_RATIO / 2, NOISE_RATIO * 1.01, NOISE_RATIO / 2],
                         "converged": [False, True, True, False]})
    assert map_check.passes(rows).tolist() == [True, False, False, True]


def test_the_tables_group_by_data_set_and_variant_in_the_csv_order(tmp_path):
    """Two variants of one data set, two starts each: one line per variant, the members' values in order, the
    passes counted at the current lines, then the run line."""
    header = {"command": "python -m benchmarks.map_check --dataset d", "commit": "abc1234", "machine": "m", "date": "d"}
    rows = [{"dataset": "d", "model": "cnn", "variant": variant, "seed": seed, "epochs": epochs, "batch_lr": rate,
             "share": share, "gain": 0.0, "rise": 1.0, "flat": True, "noise_ratio": ratio, "converged": True,
             "seconds": 1.0, "accuracy": 0.9, "rmse": float("nan"), "test_ll": ll, **header}
            for variant, epochs, rate, seed, share, ratio, ll in [
                ("defaults", 200, 0.01, 1, 0.01, 0.02, -0.2), ("defaults", 200, 0.01, 2, 0.02, 0.03, -0.25),
                ("a hundredth of the rate", 200, 0.0001, 1, 0.02, 0.5, -1.0),
                ("a hundredth of the rate", 200, 0.0001, 2, 0.05, 0.01, -1.1)]]
    path = tmp_path / "results.csv"
    pd.DataFrame(rows, columns=map_check.COLUMNS).to_csv(path, index=False)
    text = map_check.tables_from_csv(path)
    assert "| defaults | 200 | 0.01 | 1.00, 2.00 | 0.020, 0.030 | 2 of 2 | -0.200, -0.250 |" in text
    assert "| a hundredth of the rate | 200 | 0.0001 | 2.00, 5.00 | 0.500, 0.010 | 0 of 2 | -1.000, -1.100 |" in text
    assert text.rstrip().endswith("- run: `python -m benchmarks.map_check --dataset d` at abc1234 on m, d")
