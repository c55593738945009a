"""MC dropout's UCI protocol is the paper's code: its grid, its epochs, its weight decay as a prior, its fixed noise."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.map_search.log_joint import prior_distributions
from bnn.inference.mc_dropout import dropout_forward, expected_log_prior
from bnn.inference.mc_dropout.fit import draw_masks
from bnn.inference.mc_dropout.uci_protocol import (
    DROPOUT_RATES,
    LENGTH_SCALE,
    paper_epochs,
    paper_grid,
    paper_model,
)

from bnn.experiments.uci.protocol import uci_model


def test_the_grid_is_the_folders_rates_times_its_taus_and_each_axis_drops_out_when_fixed_or_missing(tmp_path):
    (tmp_path / "dropout_rates.txt").write_text("0.005\n0.05\n")
    (tmp_path / "tau_values.txt").write_text("0.1 0.15\n0.2\n")
    assert paper_grid({}, tmp_path) == {"dropout_rate": [0.005, 0.05], "noise_precision": [0.1, 0.15, 0.2]}
    assert paper_grid({"dropout_rate": 0.1}, tmp_path) == {"noise_precision": [0.1, 0.15, 0.2]}
    (tmp_path / "dropout_rates.txt").unlink()
    (tmp_path / "tau_values.txt").unlink()
    assert paper_grid({}, tmp_path) == {"dropout_rate": list(DROPOUT_RATES)}  # no tau file: the noise is learned


@pytest.mark.parametrize("text, message", [("0.1 -2\n", r"must list noise precisions tau > 0, got \[0.1, -2.0\]"),
                                           ("0.1 tau\n", "must list noise precisions tau > 0 separated by spaces"),
                                           ("\n", r"must list noise precisions tau > 0, got \[\]"),
                                           ("inf\n", r"must list noise precisions tau > 0, got \[inf\]")])
def test_a_bad_tau_file_is_refused_naming_it(tmp_path, text, message):
    (tmp_path / "tau_values.txt").write_text(text)
    with pytest.raises(ValueError, match=f"{tmp_path / 'tau_values.txt'} {message}"):
        paper_grid({}, tmp_path)


def test_the_epochs_are_ten_times_the_folders_unless_the_user_set_the_length(tmp_path):
    assert paper_epochs({}, tmp_path) == {"epochs": 400}  # no n_epochs.txt: the papers' 40
    (tmp_path / "n_epochs.txt").write_text("20\n")
    assert paper_epochs({}, tmp_path) == {"epochs": 200}
    assert paper_epochs({"epochs": 4000}, tmp_path) == paper_epochs({"steps": 10}, tmp_path) == {}
    (tmp_path / "n_epochs.txt").write_text("2.5\n")
    with pytest.raises(ValueError, match="n_epochs.txt must hold one positive whole number"):
        paper_epochs({}, tmp_path)


def standardised_data(y_scale: float) -> Dataset:
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    y = y_scale * (x[:, 0] - x[:, 1] ** 2) + 5.0
    return Dataset.from_arrays("data", "regression", x[:30], y[:30], x[30:], y[30:])


@pytest.mark.parametrize("rate, tau, y_scale", [(0.05, 0.15, 9.0), (0.005, 200.0, 0.3)])
def test_the_objective_times_twice_the_noise_variance_is_the_papers_squared_error_plus_its_weight_decay(rate, tau, y_scale):
    r"""Keras's loss in the paper's code, :math:`\frac1N\sum_i (y_i - f_i)^2 + \lambda \sum_l \lVert W_l\rVert^2` with
    :math:`\lambda = l^2 (1-p) / (2N\tau)`, against this collection's per-example objective (the negative log
    likelihood and the prior's expected log density, over N) times :math:`2\sigma_z^2`: equal up to a constant, so
    the differences between two weight settings (biases alike, which the paper does not decay) agree."""
    data = standardised_data(y_scale)
    settings, options = paper_model(data, {"dropout_rate": rate, "noise_precision": tau, "epochs": 3})
    assert options == {"dropout_rate": rate, "epochs": 3}
    model = uci_model(3, 8, **settings)
    s_y = float(data.y_scaler.std)
    noise = 1 / (s_y * math.sqrt(tau))
    assert settings["likelihood"] == {"name": "gaussian", "scale": pytest.approx(noise, rel=1e-12)}
    x, y = data.x_train.double(), data.y_train.double()
    n, distributions = x.shape[0], prior_distributions(model)
    torch.manual_seed(1)
    masks = [mask.double() for mask in draw_masks(model, rate, (n,))]

    def ours(weights):
        f = dropout_forward(model, x, weights, masks)
        log_likelihood = model.likelihood.distribution(f, {}).log_prob(y).sum()
        return -(log_likelihood + expected_log_prior(model, weights, rate, distributions)) / n

    def keras(weights):
        f = dropout_forward(model, x, weights, masks)[:, 0]
        decay = LENGTH_SCALE ** 2 * (1 - rate) / (2 * n * tau)
        return ((y - f) ** 2).mean() + decay * sum(weights[s.name].pow(2).sum() for s in model.sites[::2])

    first = {site.name: torch.randn(site.shape, dtype=torch.float64) for site in model.sites}
    second = {name: 3 * torch.randn_like(value) if name.endswith("weight") else value for name, value in first.items()}
    with torch.no_grad():
        ours_change = 2 * noise ** 2 * (ours(second) - ours(first))
        keras_change = keras(second) - keras(first)
    assert keras_change.abs() > 1  # the weights matter, the decay among them
    torch.testing.assert_close(ours_change, keras_change, rtol=1e-9, atol=0)


def test_without_a_tau_the_noise_is_learned_and_the_prior_follows_the_default_rate():
    data = standardised_data(2.0)
    settings, options = paper_model(data, {"epochs": 3})
    assert options == {"epochs": 3} and settings["likelihood"] == {"name": "gaussian", "scale": None}
    assert settings["prior"]["scale"] == pytest.approx(math.sqrt(2) / (LENGTH_SCALE * float(data.y_scaler.std) * 0.99))
