"""MC dropout on the Bayesian CNN: channel dropout after every block and unit dropout in the head, per example in
training (against a hand-written dropout network), per draw as masked weights (whole channels zeroed at the rate),
the prior term, a fit on digits, the command line, and a network that states dropout its forward does not apply."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from bnn.datasets import load_dataset
from bnn.inference import Posterior, fit
from bnn.inference.map_search.log_joint import prior_distributions
from bnn.inference.mc_dropout import draw_masks, dropout_forward, expected_log_prior
from bnn.models import BayesianCNN, DroppedInputs, GaussianPrior
from bnn.models.cnn import DEFAULT_CNN_PRIOR

from bnn.cli.main import main
from tests.models.test_network import SkipNet

RATE = 0.3
KEEP = 1 - RATE
GENERATOR = torch.Generator().manual_seed(0)
X = torch.randn(30, 64, generator=GENERATOR)
Y = (X[:, :32].sum(1) > 0).long() + (X[:, 32:].sum(1) > 0).long()  # three classes


def small_cnn(**kwargs) -> BayesianCNN:
    """8 x 8 images, blocks of 3 and 4 channels (pooled to 4 x 4, then 2 x 2: the head reads 4 channels of 4 positions),
    a hidden layer of 5, three classes; ReLU and max-pooling, as the hand-written network."""
    return BayesianCNN(64, 3, **{"input_shape": (8, 8), "channels": (3, 4), "hidden": (5,), "activation": "relu",
                                 "pooling": "max", "likelihood": "categorical", **kwargs})


@pytest.fixture(scope="module")
def posterior() -> Posterior:
    return fit(small_cnn(), (X, Y), "mc-dropout", dropout_rate=RATE, steps=20, num_samples=400, progress=False)


def hand_written_dropout_network(model: BayesianCNN, x: torch.Tensor, weights: dict, masks: list) -> torch.Tensor:
    """The CNN with ``F.dropout2d``'s semantics written out: each example's mask of each channel multiplies the whole
    channel after blocks 0 and 1, and each example's mask of each hidden unit multiplies it before the last layer."""
    channel_masks_0, channel_masks_1, unit_masks = masks
    h = x.reshape(-1, 1, 8, 8)
    h = F.max_pool2d(F.relu(F.conv2d(h, weights["features.0.weight"], weights["features.0.bias"], padding=1)), 2)
    h = h * channel_masks_0[:, :, None, None]
    h = F.max_pool2d(F.relu(F.conv2d(h, weights["features.1.weight"], weights["features.1.bias"], padding=1)), 2)
    h = h * channel_masks_1[:, :, None, None]
    h = F.relu(F.linear(h.flatten(1), weights["classifier.0.weight"], weights["classifier.0.bias"]))
    return F.linear(h * unit_masks, weights["classifier.1.weight"], weights["classifier.1.bias"])


def test_training_drops_whole_channels_per_example_as_a_hand_written_dropout_network_does():
    model = small_cnn()
    weights = {site.name: torch.randn(site.shape, generator=GENERATOR) for site in model.sites}
    torch.manual_seed(1)
    masks = draw_masks(model, RATE, (X.shape[0],))
    assert [tuple(mask.shape) for mask in masks] == [(30, 3), (30, 4), (30, 5)]  # one mask per unit per example
    torch.testing.assert_close(dropout_forward(model, X, weights, masks), hand_written_dropout_network(model, X, weights, masks))


def test_training_masks_are_per_channel_per_example_zero_at_the_rate_and_scale_by_one_over_keep():
    model = BayesianCNN(64, 10, input_shape=(8, 8), channels=(8, 16), likelihood="categorical")
    torch.manual_seed(2)
    masks = draw_masks(model, RATE, (500,))
    trials = dropped = 0
    for mask in masks:
        # inverted dropout: a kept unit is scaled by 1 / (1 - p)
        assert torch.equal(mask.unique(), torch.tensor([0.0, 1.0]) / KEEP)
        assert not (mask == mask[:1]).all(1).all()  # the examples have their own masks
        trials, dropped = trials + mask.numel(), dropped + int((mask == 0).sum())
    # within a channel every position shares its example's mask: the mask of the head's flattened input
    flat = model.dropped_inputs()[1].input_mask(masks[1])  # (500, 16 channels x 4 positions)
    assert torch.equal(flat.reshape(500, 16, 4), masks[1].unsqueeze(-1).expand(500, 16, 4))
    # the dropped fraction is Binomial(trials, p) / trials: within 4 standard deviations
    assert abs(dropped / trials - RATE) < 4 * math.sqrt(RATE * (1 - RATE) / trials), (dropped, trials)


def channel_masks(draws: torch.Tensor, positions: int) -> torch.Tensor:
    """Each draw's mask of each input unit of a weight draw ``(S, out, units * positions, *kernel)``, read off its zero
    slices: ``(S, units)``, after checking that a unit's slice is zero whole or not at all."""
    zero = (draws == 0).transpose(1, 2).reshape(draws.shape[0], -1, positions * draws.shape[1] * math.prod(draws.shape[3:]))
    assert (zero.all(-1) | ~zero.any(-1)).all()  # a unit is dropped whole
    return (~zero.all(-1)).to(draws.dtype) / KEEP


def test_draws_zero_whole_channels_and_units_at_the_rate_and_the_rest_is_shared(posterior):
    model, weights, draws = posterior.model, posterior.extras["weights"], posterior.draws()
    trials = dropped = 0
    for entry in model.dropped_inputs():
        masks = channel_masks(draws[entry.weight.name], entry.positions)
        # the draw is the fitted weight with each unit's slice times its mask, 0 or 1 / (1 - p), exactly
        torch.testing.assert_close(draws[entry.weight.name], weights[entry.weight.name] * entry.weight_mask(masks),
                                   rtol=0, atol=0)
        trials, dropped = trials + masks.numel(), dropped + int((masks == 0).sum())
    assert abs(dropped / trials - RATE) < 4 * math.sqrt(RATE * (1 - RATE) / trials), (dropped, trials)
    kept = {site.name for site in model.sites} - {entry.weight.name for entry in model.dropped_inputs()}
    assert kept == {"features.0.weight", "features.0.bias", "features.1.bias", "classifier.0.bias", "classifier.1.bias"}
    for name in kept:  # biases and the kernels that read the image are point estimates
        assert torch.equal(draws[name], weights[name].expand_as(draws[name]))


def test_the_predictive_averages_the_dropout_network_over_the_draws_masks(posterior):
    model, draws = posterior.model, posterior.draws()
    masks = [channel_masks(draws[entry.weight.name], entry.positions).unsqueeze(-2) for entry in model.dropped_inputs()]
    weights = {name: value.expand(400, *value.shape) for name, value in posterior.extras["weights"].items()}
    passes = dropout_forward(model, X[:7], weights, masks)
    assert passes.shape == (400, 7, 3)
    torch.testing.assert_close(posterior.function_draws(X[:7], draws), passes)
    torch.testing.assert_close(posterior.predict(X[:7]).probs, passes.softmax(-1).mean(0))


def test_the_fan_in_gaussian_prior_is_weight_decay_over_one_minus_p_on_the_dropped_weights_only():
    r""":math:`\mathcal{N}(0, s^2/\text{fan\_in})` (the default, :math:`s = 2`): a dropped weight's term is
    :math:`-\text{fan\_in}\lVert M\rVert^2 / (2 s^2 (1-p))`, a kept one's (the image's kernels, the biases)
    :math:`-\text{fan\_in}\lVert M\rVert^2 / (2 s^2)`."""
    model = small_cnn()
    distributions = prior_distributions(model)
    values = {site.name: torch.randn(site.shape, generator=GENERATOR) for site in model.sites}
    zero = {name: torch.zeros_like(value) for name, value in values.items()}
    change = expected_log_prior(model, values, RATE, distributions) - expected_log_prior(model, zero, RATE, distributions)
    dropped = {entry.weight.name for entry in model.dropped_inputs()}
    scale = DEFAULT_CNN_PRIOR["scale"]
    by_hand = sum(-site.fan_in * values[site.name].pow(2).sum() / (2 * scale**2 * (KEEP if site.name in dropped else 1))
                  for site in model.sites)
    torch.testing.assert_close(change, by_hand)


def test_a_network_whose_forward_does_not_apply_its_stated_dropout_is_told_how_to():
    class StatedSkipNet(SkipNet):
        def dropped_inputs(self):
            return (DroppedInputs(self.sites[0], self.in_features),)

    x, y = torch.randn(10, 2), torch.randn(10)
    with pytest.raises(ValueError, match=r"StatedSkipNet.dropped_inputs\(\) puts dropout on the inputs of the layers "
                                         r"\['hidden'\], but its forward called no bnn.models.layers.linear or conv"):
        fit(StatedSkipNet(2, prior=GaussianPrior(1.0)), (x, y), "mc-dropout", steps=3, progress=False)


@pytest.mark.long
def test_a_quick_fit_on_digits_beats_chance_widely_and_saves_and_loads(tmp_path):
    data = load_dataset("digits")
    model = BayesianCNN(64, 10, input_shape=data.input_shape, likelihood="categorical")
    posterior = fit(model, data, "mc-dropout", dropout_rate=0.1, steps=40, num_samples=20, seed=0, progress=False)
    probs = posterior.predict(data.x_test, seed=0).probs
    accuracy = (probs.argmax(-1) == data.y_test).double().mean().item()
    assert accuracy > 0.7, accuracy  # ten classes: chance is 0.1 (measured 0.89 at this seed)
    loaded = Posterior.load(posterior.save(tmp_path / "fit"))
    assert isinstance(loaded.model, BayesianCNN) and loaded.record == posterior.record
    torch.testing.assert_close(loaded.predict(data.x_test, seed=0).probs, probs)


@pytest.mark.long
def test_the_command_line_fits_the_cnn_on_digits(tmp_path):
    out = tmp_path / "run"
    main(["fit", "--model", "cnn", "--dataset", "digits", "--method", "mc-dropout", "--channels", "4", "--hidden", "8",
          "--dropout-rate", "0.1", "--steps", "20", "--num-samples", "10", "--out", str(out), "--quiet"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "mc-dropout" and metrics["test_accuracy"] > 0.3 and math.isfinite(metrics["test_ll"])
    loaded = Posterior.load(out)
    assert isinstance(loaded.model, BayesianCNN) and loaded.model.channels == (4,) and loaded.record.steps_done == 20
