"""The convergence verdict of Markov chains: the predictive R-hat and divergences decide, the weights' R-hat does not."""

from __future__ import annotations

import numpy as np
import torch
from bnn.inference.diagnostics.convergence import MIN_ESS_PER_CHAIN, chain_diagnostics, predictive_draws
from bnn.models import BayesianMLP, draw_batches

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


def test_one_chain_never_converges():
    """R-hat compares chains: one chain, however clean its draws, cannot show it found the whole posterior."""
    one = {name: value[:1] for name, value in permuted_chains().items()}
    found = chain_diagnostics(MODEL, one, X, np.zeros((1, DRAWS), dtype=bool))
    assert found.r_hat_max is None and found.r_hat_predictive is None and found.divergences == 0
    assert found.ess_predictive_min > 500  # the draws themselves are fine
    assert not found.converged and found.problems() == [
        "one chain ran to the end: R-hat, which compares chains, cannot be computed"]


def test_a_failed_chain_fails_the_verdict():
    found = chain_diagnostics(MODEL, permuted_chains(), X, np.zeros((2, DRAWS), dtype=bool), failed_chains=1)
    assert found.r_hat_predictive < 1.01 and not found.converged and found.problems() == ["1 chain(s) failed"]


def test_chains_that_agree_but_mix_slowly_do_not_converge():
    """Both chains sweep the same range in antiphase, a period of 100 draws: their split R-hat is below 1.01, but
    1000 draws each hold about 35 independent ones, below the 100 per chain the verdict asks for."""
    chains = permuted_chains()
    sweep = torch.sin(2 * torch.pi * torch.arange(DRAWS) / 100)
    chains["layers.1.bias"] = torch.stack([sweep, -sweep])[:, :, None]
    found = chain_diagnostics(MODEL, chains, X, np.zeros((2, DRAWS), dtype=bool))
    assert found.r_hat_predictive <= 1.01 and found.divergences == 0
    assert found.ess_predictive_min < 2 * MIN_ESS_PER_CHAIN and not found.converged
    assert found.problems() == [f"the predictions' smallest bulk ESS is {found.ess_predictive_min:.1f} < 200 (100 per chain)"]


def test_the_predictive_draws_are_computed_a_batch_of_draws_at_a_time_with_the_same_numbers(monkeypatch):
    model = BayesianMLP(1, 1, hidden=(2,), likelihood={"name": "gaussian", "scale": None})
    samples, x = permuted_chains(), torch.linspace(-2, 2, 30).unsqueeze(-1)
    whole = predictive_draws(model, samples, x)
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda x, values: calls.append(len(next(iter(values.values()))))
                        or forward(x, values))
    monkeypatch.setattr(draw_batches, "VALUES_PER_BATCH", 300 * 30 * max(model.activation_widths()))  # 300 draws
    batched = predictive_draws(model, samples, x)
    assert calls == [300] * 6 + [200]  # 2 chains x 1000 draws
    np.testing.assert_array_equal(batched, whole)
    assert whole.shape == (2, DRAWS, 30 + 1)  # f at each input, then the noise scale


def test_chains_that_agree_on_the_location_but_not_the_spread_are_told_so():
    """The output bias jitters by 0.01 in chain 0 and by 0.02 in chain 1, about the same centre: the bulk part of the
    predictive R-hat (where the chains lie) passes, the tail part (how far they spread) fails, and the verdict says
    which."""
    chains = permuted_chains()
    chains["layers.1.bias"][1] *= 2.0
    found = chain_diagnostics(MODEL, chains, X, np.zeros((2, DRAWS), dtype=bool))
    assert found.r_hat_predictive_bulk <= 1.01 < found.r_hat_predictive and found.spread_only and not found.converged
    assert found.problems() == [
        f"the chains agree on where the predictions lie (bulk R-hat {found.r_hat_predictive_bulk:.3f}) but not on how "
        f"far they spread: predictive R-hat (of f(x) at the training inputs and of the noise) "
        f"{found.r_hat_predictive:.3f} > 1.01, from its tail part (max R-hat over the weights {found.r_hat_max:.3f})"]


def test_chains_apart_are_not_a_matter_of_spread():
    found = chain_diagnostics(MODEL, permuted_chains((0.5, 0.6)), X, np.zeros((2, DRAWS), dtype=bool))
    assert found.r_hat_predictive_bulk > 1.5 and not found.spread_only
    assert found.problems()[0].startswith("the chains disagree on the predictions")
