from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import chain_diagnostics
from bnn.inference.evaluation.fidelity import (
    MIN_ESS,
    _classifier_distances,
    _jackknife,
    fidelity,
    wasserstein_2,
)
from bnn.models import BayesianMLP

from tests.support.chains import chains_posterior

X = torch.linspace(-2, 2, 7)[:, None]


def linear_posterior(weight_mean=1.0, bias_mean=0.0, chains=4, draws=500, seed=0, likelihood=None):
    """A converged-looking posterior of a linear model: independent Gaussian draws of its weight and bias."""
    generator = torch.Generator().manual_seed(seed)
    model = BayesianMLP(1, 1, hidden=(), likelihood=likelihood or {"name": "gaussian", "scale": 0.5})
    samples = {"layers.0.weight": weight_mean + 0.3 * torch.randn(chains, draws, 1, 1, generator=generator),
               "layers.0.bias": bias_mean + 0.2 * torch.randn(chains, draws, 1, generator=generator)}
    y = torch.zeros(len(X)) if model.likelihood.task == "regression" else (X[:, 0] > 0).float()
    return chains_posterior(model, samples, X, y)


def test_two_gaussians_are_at_their_closed_form_distance_within_the_jackknifes_error():
    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(20_000, 3, generator=generator), 1 + 2 * torch.randn(20_000, 3, generator=generator)
    estimate, error = _jackknife(lambda p, q: float(wasserstein_2(p, q).mean()), a, b)
    assert abs(estimate - math.sqrt(1**2 + (2 - 1) ** 2)) < 4 * error
    # the jackknife's error is the spread of the estimate over fresh draws (within a factor of 2)
    replicates = [float(wasserstein_2(torch.randn(2000, 1, generator=generator),
                                      1 + 2 * torch.randn(2000, 1, generator=generator)).mean()) for _ in range(40)]
    _, small_error = _jackknife(lambda p, q: float(wasserstein_2(p, q).mean()), a[:2000, :1], b[:2000, :1])
    assert 0.5 < small_error / np.std(replicates) < 2


def test_classifier_distances_of_fixed_probabilities_are_their_closed_forms():
    p = torch.tensor([0.7, 0.3], dtype=torch.float64).expand(20, 5, 2)
    q = torch.tensor([0.4, 0.6], dtype=torch.float64).expand(30, 5, 2)
    agreement, agreement_se, total_variation, total_variation_se = _classifier_distances(p, q)
    assert (agreement, agreement_se) == (0.0, 0.0)
    assert total_variation == pytest.approx(0.3) and total_variation_se == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("likelihood", [None, "bernoulli"], ids=["regression", "binary"])
def test_a_posterior_against_itself_is_at_distance_zero(likelihood):
    reference = linear_posterior(likelihood=likelihood)
    [row] = fidelity(reference, {"itself": reference}, X).to_dict("records")
    if likelihood is None:
        assert row == {"wasserstein": 0.0, "wasserstein_se": 0.0, "std_ratio": 1.0, "std_ratio_se": 0.0}
    else:
        assert row == {"agreement": 1.0, "agreement_se": 0.0, "total_variation": 0.0, "total_variation_se": 0.0}


def test_a_shifted_posterior_is_at_the_shifts_distance_and_a_wider_one_has_the_larger_spread():
    reference = linear_posterior()
    shifted = linear_posterior(bias_mean=0.25)  # the same draws, every f(x) moved by 0.25: the quantiles move with it
    table = fidelity(reference, {"shifted": shifted, "another seed": linear_posterior(seed=7)}, X)
    assert table.loc["shifted", "wasserstein"] == pytest.approx(0.25, abs=1e-6)
    assert table.loc["shifted", "std_ratio"] == pytest.approx(1.0, abs=1e-6)
    another = table.loc["another seed"]
    assert abs(another["std_ratio"] - 1) < 4 * another["std_ratio_se"]  # the same law: equal spreads within error
    # the same law: apart by the finite draws alone, of the order of sd / sqrt(M) for M draws of y at each input
    floor = float(reference.predict(X).std.mean()) / math.sqrt(reference.num_chains * reference.num_draws)
    assert another["wasserstein"] < 5 * floor < 0.25 / 2


def test_a_reference_that_fails_its_own_check_is_refused_naming_the_check():
    apart = linear_posterior(chains=2)
    apart.samples["layers.0.bias"][1] += 3.0  # the second chain elsewhere
    with pytest.raises(ValueError, match=r"refused as a reference: the split R-hat of f\(x\) reaches [0-9.]+, above 1.01"):
        fidelity(apart, {"x": linear_posterior()}, X)
    short = linear_posterior(chains=2, draws=60)
    with pytest.raises(ValueError, match=rf"the bulk ESS of f\(x\) falls to \d+, below {MIN_ESS}"):
        fidelity(short, {"x": linear_posterior()}, X)
    diverging = linear_posterior()
    flags = np.zeros((4, 500), dtype=bool)
    flags[0, :3] = True
    diverging.record.diagnostics = chain_diagnostics(diverging.model, diverging.samples, X, flags)
    with pytest.raises(ValueError, match="refused as a reference: 3 divergent transitions; run more chains"):
        fidelity(diverging, {"x": linear_posterior()}, X)


def test_posteriors_of_another_task_are_refused():
    with pytest.raises(ValueError, match="predicts a binary target and the reference a regression one"):
        fidelity(linear_posterior(), {"classifier": linear_posterior(likelihood="bernoulli")}, X)


@pytest.mark.parametrize("link_approx", ["probit", "bridge"])
def test_a_linearised_classifier_is_measured_by_its_link_approximations_probabilities(link_approx):
    """Laplace's class probabilities come from its link approximation, not from the mean of its draws' softmax: the
    total variation and agreement are those of the probabilities it predicts, and its draws add no error."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(40, 2, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    model = BayesianMLP(2, 3, hidden=(4,), likelihood="categorical")
    laplace = fit(model, (x, y), "laplace", seed=0, progress=False, link_approx=link_approx, num_samples=2000)
    draws = {name: value.reshape(4, 500, *value.shape[2:]) for name, value in laplace.samples.items()}
    reference = chains_posterior(laplace.model, draws, x, y)  # its weight draws, pushed through the network
    inputs = 2 * torch.randn(9, 2, generator=generator)
    [row] = fidelity(reference, {"laplace": laplace}, inputs).to_dict("records")
    p = reference.predict(inputs).probs.double()
    q = laplace.predict(inputs).probs.double()
    assert not torch.allclose(q, laplace.predict(inputs, predictive="mc").probs.double(), atol=1e-3)
    assert row["total_variation"] == pytest.approx(float((p - q).abs().sum(-1).mean() / 2), rel=1e-6)  # float32
    assert row["agreement"] == float((p.argmax(-1) == q.argmax(-1)).double().mean())
