"""The predictive R-hat at each test input: exact where the network is linear, so that f(x) is known draw by draw."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.diagnostics.point_agreement import AGREEMENT_COLUMNS, agreement_at_inputs, point_r_hats
from bnn.models import from_module

CHAINS, DRAWS = 4, 500


@pytest.fixture(scope="module")
def linear():
    """f(x) = w x + b, and an SVI fit of it (for a record and the training data)."""
    data = load_toy1d(n_train=20, n_test=5)
    model = from_module(torch.nn.Linear(1, 1), likelihood={"name": "gaussian", "scale": 0.5})
    return model, fit(model, data, steps=5, num_samples=5, progress=False)


def posterior_with(linear, w: torch.Tensor, b: torch.Tensor) -> Posterior:
    model, fitted = linear
    samples = {"weight": w.reshape(CHAINS, DRAWS, 1, 1), "bias": b.reshape(CHAINS, DRAWS, 1)}
    return Posterior(model, samples, fitted.x, fitted.y, fitted.record)


def test_two_modes_disagree_where_they_predict_differently_and_agree_where_they_do_not(linear):
    """Chains 0-1 draw w from N(0, 0.1^2), chains 2-3 from N(1, 0.1^2); b is N(0, 0.1^2) in every chain. At x = 0,
    f = b: one distribution in every chain, R-hat is ArviZ's R-hat of b's draws (about 1); at x = 1 and 2 the two
    groups' means differ by 1 and 2 against a spread of 0.14 and 0.22, R-hat far above 1.1."""
    generator = torch.Generator().manual_seed(0)
    w = 0.1 * torch.randn(CHAINS, DRAWS, generator=generator) + torch.tensor([0.0, 0.0, 1.0, 1.0])[:, None]
    b = 0.1 * torch.randn(CHAINS, DRAWS, generator=generator)
    posterior = posterior_with(linear, w, b)
    x = torch.tensor([[0.0], [0.0], [0.0], [1.0], [2.0]])
    r_hat = point_r_hats(posterior, x)
    at_zero = float(az.rhat(az.convert_to_dataset({"b": b.to(torch.float64).numpy()}))["b"].values)
    np.testing.assert_allclose(r_hat[:3], at_zero, rtol=1e-12)
    assert at_zero < 1.01 and (r_hat[3:] > 1.5).all()
    agreement = agreement_at_inputs(posterior, x)
    assert list(agreement) == list(AGREEMENT_COLUMNS)
    assert agreement["test_r_hat_max"] == pytest.approx(float(r_hat[4]))
    assert agreement["test_r_hat_within_1_1"] == agreement["test_r_hat_within_1_01"] == pytest.approx(3 / 5)


def test_an_input_where_every_draw_predicts_the_same_counts_as_outside_every_threshold(linear):
    """w = 0 and b = 0 at every draw: f(x) is constant, R-hat NaN, which no threshold admits."""
    posterior = posterior_with(linear, torch.zeros(CHAINS, DRAWS), torch.zeros(CHAINS, DRAWS))
    agreement = agreement_at_inputs(posterior, torch.tensor([[1.0]]))
    assert np.isnan(agreement["test_r_hat_max"])
    assert agreement["test_r_hat_within_1_1"] == agreement["test_r_hat_within_1_01"] == 0.0


def test_one_chain_has_no_agreement_to_measure(linear):
    _, fitted = linear
    assert agreement_at_inputs(fitted, torch.zeros(3, 1)) == dict.fromkeys(AGREEMENT_COLUMNS)
    with pytest.raises(ValueError, match="needs two or more chains, the posterior has 1; run more chains"):
        point_r_hats(fitted, torch.zeros(3, 1))
