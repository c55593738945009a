"""Out-of-distribution detection (:mod:`bnn.inference.evaluation.ood`) and its shift sets
(:mod:`bnn.inference.evaluation.shift_sets`)."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.datasets import load_dataset, load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.distance import nearest_training_distance
from bnn.inference.evaluation.ood import detection_scores, map_baseline_lines, ood_table
from bnn.inference.evaluation.shift_sets import shift_split
from bnn.models import BayesianMLP


def test_an_uncertainty_that_ignores_the_input_scores_chance():
    constant = detection_scores(torch.ones(30), torch.ones(10))
    assert constant == {"auroc": 0.5, "aupr": 0.25, "fpr_at_95_tpr": 1.0}  # aupr at chance: the positives' share
    generator = torch.Generator().manual_seed(0)
    random = detection_scores(torch.rand(2000, generator=generator), torch.rand(2000, generator=generator))
    # under no separation AUROC (Mann-Whitney) has mean 1/2 and variance (n1 + n2 + 1) / (12 n1 n2)
    assert abs(random["auroc"] - 0.5) < 4 * math.sqrt(4001 / (12 * 2000 * 2000))


def test_detection_scores_by_hand():
    assert detection_scores(torch.tensor([0.1, 0.2]), torch.tensor([0.3, 0.4])) == {
        "auroc": 1.0, "aupr": 1.0, "fpr_at_95_tpr": 0.0}
    # shifted 0.15 and 0.5: flagging both (95% of them) needs threshold 0.15, which flags 1 of the 4 others
    scores = detection_scores(torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([0.15, 0.5]))
    assert scores["fpr_at_95_tpr"] == 0.75 and scores["auroc"] == pytest.approx((1 + 4) / 8)


def test_the_gap_shift_lies_in_the_gap_and_beyond_and_farthest_holds_the_farthest_fifth():
    toy = load_toy1d()
    gap = shift_split(toy, "gap")
    raw = toy.x_scaler.inverse(gap.x_out)[:, 0]
    assert bool(((raw.abs() <= 0.3 + 1e-6) | (raw.abs() >= 1.1 - 1e-6)).all()) and torch.equal(gap.x_in, toy.x_test)
    data = load_dataset("diabetes")
    farthest = shift_split(data, "farthest")
    assert len(farthest.x_out) == round(0.2 * len(data.x_test)) and len(farthest.x_in) + len(farthest.x_out) == len(data.x_test)
    assert nearest_training_distance(farthest.x_out, data.x_train).min() >= nearest_training_distance(
        farthest.x_in, data.x_train).max()
    with pytest.raises(ValueError, match="shift set 'gap' is defined for toy1d"):
        shift_split(data, "gap")
    with pytest.raises(ValueError, match=r"unknown shift set 'noise'; choose from \['farthest', 'gap'\]"):
        shift_split(data, "noise")


def test_laplace_separates_the_gap_and_the_map_networks_epistemic_part_cannot():
    toy = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(20,), likelihood={"name": "gaussian", "scale": None})
    fits = {"map": fit(model, toy, "map", progress=False), "laplace": fit(model, toy, "laplace", progress=False)}
    table = ood_table(fits, toy, "gap")
    assert table.loc[("map", "epistemic_std"), "auroc"] == 0.5  # zero everywhere
    assert table.loc[("laplace", "epistemic_std"), "auroc"] > 0.9
    assert map_baseline_lines(table, fits, "regression")[0].startswith("laplace beats the MAP network: AUROC")
    assert "add `map` to `--methods`" in map_baseline_lines(table, {"laplace": fits["laplace"]}, "regression")[0]
