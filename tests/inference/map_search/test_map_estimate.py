"""The MAP fit of bnn.inference.map_search.map_estimate with a learned noise, on noisy points of sin(2x) (noise sd 0.1).

On 8 points a 1-30-1 network (91 weights) interpolates: the log joint over the weights and the noise has no
maximum, it grows without bound as the noise goes to 0, and under a prior the evidence does not cover the
maximum-likelihood noise collapses and the fit says so. Under a Gaussian prior the noise is chosen by the Laplace
evidence, checked on 20 points and a 1-20-1 network against an evidence computed independently, with the
network's Jacobian.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from bnn.datasets import find_uci_dir, load_toy1d, load_uci
from bnn.guides.flat_weights import split_flat
from bnn.inference import fit
from bnn.inference.map_search import map_estimate
from bnn.inference.map_search.hyperparameter_search import SEARCH_TOLERANCE
from bnn.inference.map_search.map_estimate import find_map
from bnn.models import BayesianMLP, GaussianPrior, PosteriorPrior

from bnn.experiments.uci.protocol import uci_model
from bnn.runtime.seeding import seeded
from bnn.runtime.workers import one_torch_thread

FIT = dict(steps=1000, lr=0.01, tolerance=0.1, progress=False)


pytestmark = pytest.mark.usefixtures("float64")


def noisy_sine(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.linspace(-2, 2, n).unsqueeze(-1)
    return x, torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(n, generator=torch.Generator().manual_seed(0))


def model_with(prior, hidden: int) -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(hidden,), prior=prior, likelihood={"name": "gaussian", "scale": None})


def laplace_log_evidence(model, x, y, theta: torch.Tensor, noise: float) -> float:
    r""":math:`\log p(y \mid \theta, \sigma) + \log p(\theta) + \frac{D}{2}\log 2\pi - \frac{1}{2}\log\det(J^\top J /
    \sigma^2 + I)` under the N(0, 1) prior, from the network's Jacobian."""

    def network(flat: torch.Tensor) -> torch.Tensor:
        return model.forward(x, split_flat(model.sites, flat))[:, 0]

    jacobian = torch.autograd.functional.jacobian(network, theta)
    precision = jacobian.T @ jacobian / noise**2 + torch.eye(theta.numel())
    log_likelihood = torch.distributions.Normal(network(theta), noise).log_prob(y).sum()
    log_prior = torch.distributions.Normal(0.0, 1.0).log_prob(theta).sum()
    return float(log_likelihood + log_prior + theta.numel() / 2 * math.log(2 * math.pi)
                 - torch.linalg.slogdet(precision)[1] / 2)


@pytest.mark.long
def test_under_a_gaussian_prior_the_noise_is_a_maximum_of_the_laplace_evidence():
    x, y = noisy_sine(20)
    model = model_with(GaussianPrior(1.0), 20)
    with seeded(0):
        estimate = find_map(model, x, y, **FIT)
    noise = float(estimate.latents["sigma"])
    assert estimate.converged and estimate.evidence_bracketed and estimate.multiplier == 1.0

    def evidence_at(factor: float) -> float:  # the MAP refitted from the same weights at that noise, to 1e-3 sd
        refit = find_map(model, x, y, **{**FIT, "steps": 0, "tolerance": 1e-3}, init=estimate.theta,
                         noise=torch.tensor(noise * factor))
        return laplace_log_evidence(model, x, y, refit.theta, noise * factor)

    evidence = {factor: evidence_at(factor) for factor in (0.5, 0.9, 1.0, 1.1, 2.0)}
    # the search compares evidences at refits within SEARCH_TOLERANCE = 1 posterior sd of their modes, each within
    # about 1/2 nat of its value at the mode: the noise chosen is a maximum to within 1 nat
    assert max(evidence.values()) - evidence[1.0] <= SEARCH_TOLERANCE**2
    # and the peak is resolved: a noise half or twice as large is worse by more than that
    assert max(evidence[0.5], evidence[2.0]) < evidence[1.0] - SEARCH_TOLERANCE**2


@pytest.mark.long
def test_under_another_prior_the_maximum_likelihood_noise_collapses_and_the_fit_says_so():
    x, y = noisy_sine(8)
    sites = model_with(GaussianPrior(1.0), 30).sites
    standard = PosteriorPrior({s.name: torch.zeros(s.shape) for s in sites}, {s.name: torch.ones(s.shape) for s in sites},
                              source="N(0, 1), not a GaussianPrior")
    with seeded(0), pytest.warns(RuntimeWarning, match=r"The maximum-likelihood noise fell from .* the network "
                                                        r"interpolates its training data .* use a Gaussian prior"):
        estimate = find_map(model_with(standard, 30), x, y, **FIT)
    assert not estimate.converged and estimate.evidence_bracketed is None and float(estimate.latents["sigma"]) < 1e-3


def test_choosing_the_prior_precision_needs_a_gaussian_prior_and_is_refused_before_any_work(monkeypatch):
    x, y = noisy_sine(8)
    monkeypatch.setattr(map_estimate, "_find_map", lambda *args: pytest.fail("work started"))
    with pytest.raises(ValueError, match=r"multiplier=None .* needs Gaussian priors on the covered weights"):
        find_map(model_with({"*": "gaussian", "layers.0": "laplace"}, 3), x, y, **FIT, multiplier=None)


def test_falls_along_gradient_tells_a_kink_from_a_smooth_slope():
    theta = torch.zeros(2)

    def smooth(w):
        return -((w - 1) ** 2).sum()

    def kink(w):  # largest at 0, where autograd's relu'(0) = 0 gives the gradient 1, the slope from the left
        return w.sum() - 3 * torch.relu(w).sum()

    assert not map_estimate.falls_along_gradient(smooth, theta)
    assert map_estimate.falls_along_gradient(kink, theta)
    assert not map_estimate.falls_along_gradient(kink, theta, start=2)  # no judged entry: no gradient, no kink


def relu_toy_map(seed: int = 0, **options):
    """The MAP of a 1-8-1 ReLU network with a fixed noise on 40 toy1d points: its mode sits at kinks (hidden units
    switching exactly at training inputs), where Levenberg-Marquardt stops short and the Newton decrement stays
    above the tolerance (1.69 posterior sd for seed 0)."""
    model = BayesianMLP(1, 1, hidden=(8,), activation="relu", likelihood={"name": "gaussian", "scale": 0.1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = fit(model, load_toy1d(n_train=40, n_test=10), "map", seed=seed, progress=False, **options).record
    return record, [str(w.message) for w in caught]


def test_a_relu_map_at_its_kinked_mode_converges_once_the_log_joint_stops_rising():
    record, said = relu_toy_map()
    tolerance = record.options.map_tolerance
    assert record.map_polish == "levenberg-marquardt, then lbfgs"  # L-BFGS went on where Gauss-Newton stopped
    assert record.map_newton_decrement > tolerance  # the decrement alone would fail it ...
    assert record.map_last_rise <= tolerance**2 / 2  # ... but 50 more L-BFGS iterations no longer raise the log joint
    assert record.map_converged and record.problems() == [] and not [m for m in said if "MAP polish" in m]


def test_a_map_stopped_after_ten_iterations_is_still_flagged():
    record, said = relu_toy_map(map_steps=10, map_max_iter=10)
    assert not record.map_converged and record.map_last_rise is None  # a window the budget cut short is not judged
    assert "map_max_iter" in record.problems()[0] and [m for m in said if "MAP polish" in m]


@pytest.mark.long
@pytest.mark.skipif(not find_uci_dir().is_dir(), reason="needs ../shared/data/uci beside the repository")
def test_a_relu_map_on_uci_goes_on_with_lbfgs_where_gauss_newton_stops_and_says_where_it_ended():
    """The papers' ReLU network on UCI yacht, split 0, on one torch thread as every `bnn uci` cell runs:
    Levenberg-Marquardt stops about 13 posterior sd from the mode (the Gauss-Newton model is poor across the kinks);
    L-BFGS goes on (85 nats higher after 1,000 more iterations, in a measurement) until it no longer raises the log
    joint, at a kink where the decrement stays near 5: converged, without a warning. Where it ends depends on the
    machine's arithmetic: on the CI machine of 2693829 it converged at a kink; on this project's machine on 2026-11-29
    (the same commit) it converged under pytest where the log joint stopped rising (decrement 12.2, no kink flagged)
    and, in a script, was still rising at its budget (3,958 iterations, 0.69 nats in its last window), the record and
    the warning both saying so. Whichever way it ends, the record and the warning must agree."""
    data = load_uci(find_uci_dir(), "yacht", 0)
    with one_torch_thread(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = fit(uci_model(data.in_features, 50), data, "laplace", seed=0, progress=False).record
    tolerance = record.options.map_tolerance
    assert record.map_polish == "levenberg-marquardt, then lbfgs"
    warned = [str(w.message) for w in caught if "MAP polish" in str(w.message)]
    if record.map_converged:  # at the mode, or where the log joint no longer rises (a kink, or a flat ridge)
        stopped_rising = record.map_last_rise is not None and record.map_last_rise <= tolerance**2 / 2
        assert (record.map_newton_decrement <= tolerance or stopped_rising) and not warned
    else:  # still rising at the budget: not a kink, and said
        assert not record.map_at_kink and record.map_last_rise > tolerance**2 / 2
        assert len(warned) == 1 and "stopped after" in warned[0]
