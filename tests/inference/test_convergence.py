"""The convergence verdict of Markov chains: the predictive R-hat and divergences decide, the weights' R-hat does not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bnn.inference.convergence import chain_diagnostics
from bnn.models import BayesianMLP

DRAWS = 1000


def permuted_chains(sigma_per_chain=(0.5, 0.5)) -> dict[str, torch.Tensor]:
    """Two chains of a 1-2-1 net with learned noise, in the two orders of its hidden units (the same function), with
    noise scale ``sigma_per_chain[c]`` in chain ``c``; every value jitters by 0.01 around its centre."""
    generator = torch.Generator().manual_seed(0)

    def jitter(*shape):
        return 0.01 * torch.randn(2, DRAWS, *shape, generator=generator)

    order = torch.tensor([[0, 1], [1, 0]])  # chain 1 swaps the units
    return {
        "layers.0.weight": torch.tensor([[1.0], [-2.0]])[order][:, None] + jitter(2, 1),
        "layers.0.bias": torch.tensor([0.5, -1.0])[order][:, None] + jitter(2),
        "layers.1.weight": torch.tensor([0.3, 0.7])[order][:, None, None] + jitter(1, 2),
        "layers.1.bias": jitter(1),
        "sigma": torch.tensor(sigma_per_chain)[:, None] + jitter(),
    }


MODEL = BayesianMLP(1, 1, hidden=(2,), likelihood={"name": "gaussian", "scale": None})
X = torch.linspace(-2, 2, 7)[:, None]


def test_permuted_hidden_units_converge():
    found = chain_diagnostics(MODEL, permuted_chains(), X, np.zeros((2, DRAWS), dtype=bool))
    assert found.r_hat_max > 1.5  # every weight disagrees between the chains
    assert found.r_hat_predictive < 1.01 and found.converged  # the function and the noise agree


def test_chains_that_disagree_on_the_noise_do_not_converge():
    """The same function, noise 0.5 in one chain and 0.6 in the other: the predictive distributions differ."""
    found = chain_diagnostics(MODEL, permuted_chains((0.5, 0.6)), X, np.zeros((2, DRAWS), dtype=bool))
    assert found.r_hat_predictive > 1.5 and not found.converged


def test_a_divergence_fails_the_verdict():
    diverging = np.zeros((2, DRAWS), dtype=bool)
    diverging[1, 10] = True
    found = chain_diagnostics(MODEL, permuted_chains(), X, diverging)
    assert found.divergences == 1 and not found.converged


@pytest.mark.parametrize("divergences, converged", [(0, True), (1, False)])
def test_one_chain_is_judged_by_its_divergences(divergences, converged):
    one = {name: value[:1] for name, value in permuted_chains().items()}
    diverging = np.zeros((1, DRAWS), dtype=bool)
    diverging[0, :divergences] = True
    found = chain_diagnostics(MODEL, one, X, diverging)
    assert found.r_hat_max is None and found.r_hat_predictive is None and found.converged is converged
