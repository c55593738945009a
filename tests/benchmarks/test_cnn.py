"""The CNN benchmark: a row per model and method, with its scores and own check, or NUTS's estimate."""

from __future__ import annotations

import pytest

from benchmarks import cnn

pytestmark = pytest.mark.benchmarks


def test_prints_a_row_per_model_and_method_with_scores_and_estimates(capsys):
    rows = cnn.main(["--dataset", "digits", "--models", "cnn,mlp", "--methods", "mc-dropout,nuts",
                     "--max-nuts-seconds", "1", "--", "--hidden", "4", "--steps", "200", "--num-samples", "20"])
    printed = capsys.readouterr().out
    assert [(row["model"], row["method"]) for row in rows] == [(model, method) for model in ("cnn", "mlp")
                                                              for method in ("mc-dropout", "nuts")]
    for fitted in (rows[0], rows[2]):  # MC dropout on the CNN (channel dropout) and on the MLP
        assert 0.1 < fitted["accuracy"] <= 1 and fitted["test_ll"] < 0 and fitted["fit_s"] > 0
    assert all(row["own check"].startswith("not run: estimated nuts: about") for row in rows if row["method"] == "nuts")
    assert printed.count("\n| cnn | ") == 2 and printed.count("\n| mlp | ") == 2
