"""Credible and conformal sets side by side (:mod:`bnn.inference.evaluation.set_coverage`)."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.datasets import Dataset, load_dataset, load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.conformal import conformalize
from bnn.inference.evaluation.set_coverage import carve_calibration, carve_calibration_with_shift, credible_sets, set_coverage
from bnn.inference.evaluation.shift_sets import shift_split
from bnn.models import BayesianMLP

CALIBRATION, TEST = 200, 1000


def test_the_calibration_rows_are_a_seeded_part_of_the_training_rows_and_nothing_else_changes():
    data = load_toy1d()
    part, (x_cal, y_cal) = carve_calibration(data, 0.2, seed=0)
    assert len(part.x_train) == 80 and len(x_cal) == len(y_cal) == 20
    together = torch.cat([part.x_train, x_cal])
    assert torch.equal(together.sort(0).values, data.x_train.sort(0).values)  # a partition of the training rows
    assert torch.equal(part.x_test, data.x_test) and part.y_scaler is data.y_scaler
    assert torch.equal(carve_calibration(data, 0.2, seed=0)[1][0], x_cal)
    assert not torch.equal(carve_calibration(data, 0.2, seed=1)[1][0], x_cal)
    for share in (0.0, 1.0, 1.5, 0.001):
        with pytest.raises(ValueError, match=rf"the calibration share must lie in \(0, 1\) and leave rows on both sides; "
                                             rf"{share} of toy1d's 100 training rows does not"):
            carve_calibration(data, share, seed=0)


def test_a_shift_set_that_keeps_the_data_is_redrawn_and_held_out_classes_keeps_its_inputs():
    data = load_dataset("diabetes")
    fitted, _, farthest = carve_calibration_with_shift(data, shift_split(data, "farthest"), 0.2, seed=0)
    assert farthest.dataset is fitted and torch.equal(farthest.x_out, shift_split(fitted, "farthest").x_out)
    digits = load_dataset("digits")
    held = shift_split(digits, "held-out-classes")
    fitted, (_, y_cal), kept = carve_calibration_with_shift(digits, held, 0.2, seed=0)
    assert kept.dataset is fitted and torch.equal(kept.x_out, held.x_out) and bool((y_cal < 8).all())
    assert len(fitted.x_train) + len(y_cal) == len(held.dataset.x_train)
    assert carve_calibration_with_shift(digits, None, 0.2, seed=0)[2] is None


def test_credible_sets_take_labels_by_probability_until_the_mass_reaches_the_level():
    probs = torch.tensor([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2], [0.05, 0.05, 0.9]])
    assert credible_sets(probs, 0.5).tolist() == [[False, True, False], [True, True, False], [False, False, True]]
    assert credible_sets(probs, 0.75).tolist() == [[False, True, True], [True, True, False], [False, False, True]]
    assert credible_sets(probs, 0.94).tolist() == [[True, True, True], [True, True, True], [True, False, True]]


def sine_data(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(n, 1, generator=generator) * 4 - 2
    return x, torch.sin(2 * x[:, 0]) + 0.3 * torch.randn(n, generator=generator)


@pytest.mark.filterwarnings("ignore:the MAP polish")  # told a noise six times too small, the MAP is a sharp mode
def test_an_overconfident_fits_credible_interval_undercovers_and_its_conformal_one_keeps_the_promise():
    generator = torch.Generator().manual_seed(0)
    (x, y), (x_test, y_test) = sine_data(generator, 200 + CALIBRATION), sine_data(generator, TEST)
    data = Dataset.from_arrays("sine", "regression", x, y, x_test, y_test)
    fitted, calibration = carve_calibration(data, CALIBRATION / 400, seed=0)
    model = BayesianMLP(1, 1, hidden=(16,), activation="tanh", likelihood={"name": "gaussian", "scale": 0.05})
    posterior = fit(model, fitted, "map", map_steps=500, progress=False, seed=0)  # told 0.05, the noise is 0.3 / 0.75
    scores = set_coverage(posterior, fitted, calibration)
    # coverage of split conformal: mean k / (n + 1) = 181/201, sd over calibration sets sqrt(k (n + 1 - k) /
    # ((n + 1)^2 (n + 2))) = 0.021, and 0.0095 more from 1,000 test points; 4 sd of the two together
    tolerance = 4 * math.hypot(math.sqrt(181 * 20 / (201**2 * 202)), math.sqrt(0.09 / TEST))
    assert abs(scores["conformal_coverage"] - 181 / 201) < tolerance
    assert scores["credible_coverage"] < 0.5 and scores["conformal_width"] > 2 * scores["credible_width"]
    predictor = conformalize(posterior, *calibration)
    low, high = predictor.interval(fitted.x_test)
    assert scores["conformal_width"] == pytest.approx(float((high - low).mean()) * float(fitted.y_scaler.std), rel=1e-5)


def test_a_classifiers_sets_report_their_coverage_and_size():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(200 + CALIBRATION + TEST, 2, generator=generator)
    logits = 2 * torch.stack([x[:, 0], x[:, 1], -x.sum(-1)], dim=-1)
    y = torch.distributions.Categorical(logits=logits).sample().double()
    data = Dataset.from_arrays("three", "multiclass", x[:400], y[:400], x[400:], y[400:])
    fitted, calibration = carve_calibration(data, 0.5, seed=0)
    posterior = fit(BayesianMLP(2, 3, hidden=(), likelihood="categorical"), fitted, "laplace", progress=False, seed=0)
    scores = set_coverage(posterior, fitted, calibration)
    tolerance = 4 * math.hypot(math.sqrt(181 * 20 / (201**2 * 202)), math.sqrt(0.09 / TEST))
    assert abs(scores["conformal_coverage"] - 181 / 201) < tolerance
    # a well-specified Bayesian logistic regression on 200 rows is near calibrated: its credible sets, whose mass is
    # at least 0.9, cover at least about that
    assert scores["credible_coverage"] > 0.9 - 4 * math.sqrt(0.09 / TEST)
    assert 1 <= scores["credible_set_size"] <= 3 and 0 <= scores["conformal_set_size"] <= 3
