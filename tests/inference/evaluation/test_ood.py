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
    with pytest.raises(ValueError, match=r"unknown shift set 'blur'; choose from \['farthest', 'gap', 'held-out-classes', "
                       r"'noise', 'rotation'\]"):
        shift_split(data, "blur")
    assert gap.dataset is toy and farthest.dataset is data  # neither changes the data the fits learn from


def test_held_out_classes_trains_without_the_two_highest_digits_and_scores_their_test_images():
    digits = load_dataset("digits")
    split = shift_split(digits, "held-out-classes")
    kept = split.dataset
    assert kept.name == "digits without classes 8, 9" and kept.out_features == 8 and kept.input_shape == (8, 8)
    assert bool((kept.y_train < 8).all()) and bool((kept.y_test < 8).all())
    assert len(kept.x_train) == int((digits.y_train < 8).sum()) and torch.equal(split.x_in, kept.x_test)
    assert len(split.x_out) == int((digits.y_test >= 8).sum())
    # the inputs are standardised by the kept training rows alone, and the held-out images in those units
    raw_train = digits.x_scaler.inverse(digits.x_train[digits.y_train < 8])
    assert torch.allclose(kept.x_scaler.inverse(kept.x_train), raw_train, atol=1e-4)
    assert torch.allclose(kept.x_scaler.inverse(split.x_out), digits.x_scaler.inverse(digits.x_test[digits.y_test >= 8]),
                          atol=1e-4)
    for name, message in [("breast_cancer", "breast_cancer is a 2-class data set"),
                          ("diabetes", "diabetes is a regression data set")]:
        with pytest.raises(ValueError, match=f"needs at least two left; {message}: use it on a multiclass set"):
            shift_split(load_dataset(name), "held-out-classes")


def test_noise_and_rotation_transform_the_test_images_in_their_original_units():
    digits = load_dataset("digits")
    images = digits.x_scaler.inverse(digits.x_test).reshape(-1, 8, 8)
    rotation = shift_split(digits, "rotation")
    turned = digits.x_scaler.inverse(rotation.x_out).reshape(-1, 8, 8)
    # a quarter turn counter-clockwise: the top row, read left to right, becomes the left column read bottom to top
    assert torch.allclose(turned[:, :, 0], images[:, 0, :].flip(-1), atol=1e-4)
    assert torch.equal(rotation.x_in, digits.x_test) and rotation.dataset is digits
    noise = shift_split(digits, "noise")
    added = digits.x_scaler.inverse(noise.x_out) - digits.x_scaler.inverse(digits.x_test)
    spread = float(digits.x_scaler.inverse(digits.x_train).std())
    # 23,040 standard-normal draws times the pixels' spread: their mean and sd within 4 standard errors
    assert abs(float(added.mean())) < 4 * spread / math.sqrt(added.numel())
    assert abs(float(added.std()) / spread - 1) < 4 / math.sqrt(2 * added.numel())
    assert torch.equal(shift_split(digits, "noise").x_out, noise.x_out)  # seeded
    signals = load_dataset("mnist1d")
    reversed_ = shift_split(signals, "rotation")
    assert torch.allclose(signals.x_scaler.inverse(reversed_.x_out), signals.x_scaler.inverse(signals.x_test).flip(-1),
                          atol=1e-4)
    for name in ("noise", "rotation"):
        with pytest.raises(ValueError, match=f"shift set '{name}' transforms images and diabetes is tabular"):
            shift_split(load_dataset("diabetes"), name)


def test_laplace_separates_the_gap_and_the_map_networks_epistemic_part_cannot():
    toy = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(20,), likelihood={"name": "gaussian", "scale": None})
    fits = {"map": fit(model, toy, "map", progress=False), "laplace": fit(model, toy, "laplace", progress=False)}
    table = ood_table(fits, shift_split(toy, "gap"))
    assert table.loc[("map", "epistemic_std"), "auroc"] == 0.5  # zero everywhere
    assert table.loc[("laplace", "epistemic_std"), "auroc"] > 0.9
    assert map_baseline_lines(table, fits, "regression")[0].startswith("laplace beats the MAP network: AUROC")
    assert "add `map` to `--methods`" in map_baseline_lines(table, {"laplace": fits["laplace"]}, "regression")[0]
