"""benchmarks/mc_dropout_check.py: the variants' options and the table made from the CSV."""

import pandas as pd
from bnn.inference.mc_dropout.record import GAIN_LIMIT

from benchmarks import mc_dropout_check


def test_the_variants_give_a_length_and_a_rate_but_the_defaults_give_neither():
    assert mc_dropout_check.variant_options("defaults", 3000) == {}
    assert mc_dropout_check.variant_options("twice the length", 3000) == {"steps": 6000, "lr": 0.01}
    assert mc_dropout_check.variant_options("a hundredth of the rate", 3000) == {"steps": 3000, "lr": 0.0001}
    assert mc_dropout_check.variant_options("a tenth of the length", 3000) == {"steps": 300, "lr": 0.01}


def test_the_table_counts_the_passes_at_the_current_limit_by_data_set_and_variant(tmp_path):
    """A fit fails only with a gain above the limit *and* beyond three standard errors; the CSV's ``converged`` (the
    verdict at the run's lines) is not read."""
    header = {"command": "python -m benchmarks.mc_dropout_check --dataset d", "commit": "abc1234", "machine": "m",
              "date": "d"}
    rows = [{"dataset": "d", "model": "mlp", "variant": variant, "seed": seed, "steps": steps, "lr": lr, "gain": gain,
             "z": z, "converged": True, "seconds": 1.0, "accuracy": float("nan"), "rmse": 1.0, "test_ll": ll, **header}
            for variant, steps, lr, seed, gain, z, ll in [
                ("defaults", 3000, 0.01, 0, 0.5 * GAIN_LIMIT, 9.0, -1.0),
                ("defaults", 6000, 0.01, 1, 2 * GAIN_LIMIT, 2.9, -1.1),
                ("a tenth of the length", 300, 0.01, 0, 2 * GAIN_LIMIT, 3.1, -2.0),
                ("a tenth of the length", 300, 0.01, 1, 0.01 * GAIN_LIMIT, 0.1, -2.5)]]
    path = tmp_path / "mc_dropout.csv"
    pd.DataFrame(rows, columns=mc_dropout_check.COLUMNS).to_csv(path, index=False)
    text = mc_dropout_check.tables_from_csv(path)
    assert "| d | defaults | 3000, 6000 | 0.01 | 0.010, 0.040 | 9.0, 2.9 | 2 of 2 | -1.000, -1.100 |" in text
    assert "| d | a tenth of the length | 300 | 0.01 | 0.040, 0.000 | 3.1, 0.1 | 1 of 2 | -2.000, -2.500 |" in text
    assert text.rstrip().endswith("- run: `python -m benchmarks.mc_dropout_check --dataset d` at abc1234 on m, d")
