"""The collection's GGN Laplace against laplace-torch (Immer, Daxberger et al.), its reference implementation.

On the same network, weights (the collection's MAP, copied into a ``torch.nn.Sequential``), noise and prior
precision, both compute the posterior precision, its inverse, the Laplace log marginal likelihood and the linearised
(GLM) predictive's mean and variance of the network output. Everything is float64 and exact up to round-off (no Monte
Carlo anywhere), so the tolerances are round-off tolerances. laplace-torch runs with its curvlinops backend (the
backpack and asdl backends do not work with torch 2.13's ``torch.func`` and hooks: "Cannot use both regular backward
hooks and full backward hooks on a single Module").
"""

from __future__ import annotations

import pytest
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference import fit
from bnn.inference.laplace.precision import posterior_precision
from bnn.models import BayesianMLP, GaussianPrior
from laplace import Laplace
from laplace.curvature import CurvlinopsGGN

NOISE, PRIOR_SCALE, HIDDEN, INPUTS, CLASSES = 0.3, 0.8, 6, 3, 3
PEER_NAMES = {"full": ("all", "full"), "diag": ("all", "diag"), "last-layer": ("last_layer", "full")}
"""The collection's structure -> laplace-torch's (subset_of_weights, hessian_structure)."""
ROUND_OFF = dict(rtol=1e-9, atol=1e-11)


pytestmark = pytest.mark.usefixtures("float64")


def data(task: str):
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(40, INPUTS, generator=generator)
    x_test = 2 * torch.randn(9, INPUTS, generator=generator)  # some beyond the data, where the variance grows
    if task == "regression":
        y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] + NOISE * torch.randn(40, generator=generator)
    else:
        y = (x[:, 0] + torch.sin(2 * x[:, 1]) > 0).long() + (x[:, 2] > 1).long()
    return x, y, x_test


def collection_fit(task: str, structure: str):
    x, y, x_test = data(task)
    likelihood = {"name": "gaussian", "scale": NOISE} if task == "regression" else {"name": "categorical"}
    outputs = 1 if task == "regression" else CLASSES
    model = BayesianMLP(INPUTS, outputs, hidden=(HIDDEN,), activation="tanh", prior=GaussianPrior(PRIOR_SCALE),
                        likelihood=likelihood)
    # both sides work at the same weights, which need not be the mode: a short MAP fit is enough
    posterior = fit(model, (x, y), "laplace", structure=structure, tune_prior_precision=False, map_steps=300,
                    map_tolerance=10.0, num_samples=2, seed=0, progress=False)
    return model, posterior, x, y, x_test


def peer_network(model, theta: torch.Tensor) -> torch.nn.Sequential:
    """The collection's network as a ``torch.nn.Sequential`` holding ``theta``."""
    network = torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(),
                                  torch.nn.Linear(HIDDEN, model.out_features))
    values = split_flat(model.sites, theta)
    with torch.no_grad():
        for index, layer in ((0, network[0]), (1, network[2])):
            layer.weight.copy_(values[f"layers.{index}.weight"])
            layer.bias.copy_(values[f"layers.{index}.bias"])
    return network


def peer_fit(task: str, structure: str, network, x, y):
    subset, hessian = PEER_NAMES[structure]
    likelihood = "regression" if task == "regression" else "classification"
    peer = Laplace(network, likelihood, subset_of_weights=subset, hessian_structure=hessian, backend=CurvlinopsGGN,
                   sigma_noise=NOISE if task == "regression" else 1.0, prior_precision=PRIOR_SCALE**-2)
    targets = y.unsqueeze(-1) if task == "regression" else y
    peer.fit(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, targets), batch_size=len(x)))
    return peer


CASES = [("regression", "full"), *(pytest.param(task, structure, marks=pytest.mark.slow) for task, structure in
                                    [("regression", "diag"), ("regression", "last-layer"), ("classification", "full"),
                                     ("classification", "diag"), ("classification", "last-layer")])]
"""Full regression in the default run, every other pairing in the slow one."""


@pytest.mark.long
@pytest.mark.parametrize(("task", "structure"), CASES)
def test_precision_covariance_evidence_and_glm_predictive_match_laplace_torch(task, structure):
    model, posterior, x, y, x_test = collection_fit(task, structure)
    guide = posterior.linearization.guide
    theta = guide.mean
    network = peer_network(model, theta)
    torch.testing.assert_close(network(x_test), model.forward(x_test, split_flat(model.sites, theta)), **ROUND_OFF)
    peer = peer_fit(task, structure, network, x, y)

    ours = posterior_precision(model, x, y, split_flat(model.sites, theta), structure=structure)
    torch.testing.assert_close(ours, peer.posterior_precision, **ROUND_OFF)
    theirs_covariance = peer.posterior_covariance if structure != "diag" else peer.posterior_variance
    ours_covariance = guide.covariance() if structure != "diag" else guide.scale**2
    torch.testing.assert_close(ours_covariance, theirs_covariance, rtol=1e-8, atol=1e-11)  # an inverse: cond x eps
    assert posterior.record.log_marginal_likelihood == pytest.approx(peer.log_marginal_likelihood().item(), rel=1e-10)

    mean, covariance = posterior.linearization.output_moments(model, x_test)
    peer_mean, peer_covariance = peer._glm_predictive_distribution(x_test)
    torch.testing.assert_close(mean, peer_mean, **ROUND_OFF)
    torch.testing.assert_close(covariance, peer_covariance, rtol=1e-8, atol=1e-11)
    if task == "classification":  # the multi-class probit link of both
        ours_probs = posterior.predict(x_test, num_samples=2, predictive="linearized").probs
        torch.testing.assert_close(ours_probs, peer(x_test, pred_type="glm", link_approx="probit"), rtol=1e-8, atol=1e-11)
