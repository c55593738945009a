"""The collection's GGN Laplace against laplace-torch (Immer, Daxberger et al.), its reference implementation.

On the same network, weights (the collection's MAP, copied into a ``torch.nn.Sequential``), noise and prior
precision, both compute the posterior precision, its inverse, the Laplace log marginal likelihood and the linearised
(GLM) predictive's mean and variance of the network output; for the subnetwork Laplace also the subnetwork, chosen
by laplace-torch's ``LargestVarianceDiagLaplaceSubnetMask`` from its own diagonal Laplace at the same noise and prior
precision. Everything is float64 and exact up to round-off (no Monte
Carlo anywhere), so the tolerances are round-off tolerances. laplace-torch runs with its curvlinops backend (the
backpack and asdl backends do not work with torch 2.13's ``torch.func`` and hooks: "Cannot use both regular backward
hooks and full backward hooks on a single Module").
"""

from __future__ import annotations

import copy

import pytest
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference import fit
from bnn.inference.curvature.kron_curvature import kron_factors
from bnn.inference.laplace.linearized import Linearization, laplace_bridge
from bnn.inference.laplace.precision import posterior_precision
from bnn.models import BayesianMLP, GaussianPrior, from_module
from bnn.models.layers import conv, linear
from bnn.models.network import BayesianNetwork
from bnn.models.sites import WeightSite
from bnn.models.torch_module import TorchModuleNetwork
from laplace import Laplace
from laplace.curvature import CurvlinopsGGN
from laplace.utils.subnetmask import LargestVarianceDiagLaplaceSubnetMask

NOISE, PRIOR_SCALE, HIDDEN, INPUTS, CLASSES = 0.3, 0.8, 6, 3, 3
PEER_NAMES = {"full": ("all", "full"), "diag": ("all", "diag"), "last-layer": ("last_layer", "full"),
              "kron": ("all", "kron"), "subnetwork": ("subnetwork", "full")}
"""The collection's structure -> laplace-torch's (subset_of_weights, hessian_structure)."""
ROUND_OFF = dict(rtol=1e-9, atol=1e-11)


pytestmark = pytest.mark.usefixtures("float64")

IMAGE, CHANNELS, KERNEL = (1, 3, 3), 2, 2
"""The conv net's input image (channels, height, width), its output channels and its square kernel."""


def conv_inputs(x: torch.Tensor) -> torch.Tensor:
    """Images of :data:`IMAGE`'s size from the MLP's inputs: the three features and their products."""
    return torch.cat([x, x * x.roll(1, dims=1), x.sin()], dim=1)


class ConvNet(BayesianNetwork):
    """A 2-D convolution, tanh, and a linear read-out of the flattened feature maps, written with
    :func:`bnn.models.layers.conv` and :func:`~bnn.models.layers.linear` (laplace-torch's KFAC, through curvlinops,
    knows ``Conv2d`` and ``Linear``, not ``Conv1d``)."""

    FLAT = CHANNELS * (IMAGE[1] - KERNEL + 1) * (IMAGE[2] - KERNEL + 1)

    def __init__(self, outputs: int, *, prior, likelihood) -> None:
        patch = IMAGE[0] * KERNEL * KERNEL
        sites = (WeightSite("conv.weight", 0, torch.Size((CHANNELS, IMAGE[0], KERNEL, KERNEL)), patch),
                 WeightSite("conv.bias", 0, torch.Size((CHANNELS,)), patch),
                 WeightSite("out.weight", 1, torch.Size((outputs, self.FLAT)), self.FLAT),
                 WeightSite("out.bias", 1, torch.Size((outputs,)), self.FLAT))
        super().__init__(IMAGE[0] * IMAGE[1] * IMAGE[2], outputs, sites, prior=prior, likelihood=likelihood)

    def forward(self, x, w):
        h = torch.tanh(conv(x.unflatten(-1, IMAGE), w["conv.weight"], w["conv.bias"], name="conv"))
        return linear(h.flatten(-3), w["out.weight"], w["out.bias"], name="out")

    def arguments(self):
        return {"outputs": self.out_features}


def data(task: str):
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(40, INPUTS, generator=generator)
    x_test = 2 * torch.randn(9, INPUTS, generator=generator)  # some beyond the data, where the variance grows
    if task == "regression":
        y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] + NOISE * torch.randn(40, generator=generator)
    else:
        y = (x[:, 0] + torch.sin(2 * x[:, 1]) > 0).long() + (x[:, 2] > 1).long()
    return x, y, x_test


def likelihood_of(task: str) -> dict:
    return {"name": "gaussian", "scale": NOISE} if task == "regression" else {"name": "categorical"}


def torch_module(network: str, outputs: int) -> torch.nn.Sequential:
    """The MLP (``"module-mlp"``) or the conv net (``"module-conv"``) as a ``torch.nn.Sequential``."""
    if network == "module-conv":
        return torch.nn.Sequential(torch.nn.Unflatten(1, IMAGE), torch.nn.Conv2d(IMAGE[0], CHANNELS, KERNEL),
                                   torch.nn.Tanh(), torch.nn.Flatten(), torch.nn.Linear(ConvNet.FLAT, outputs))
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, outputs))


def collection_fit(task: str, structure: str, network: str = "mlp", **options):
    """A short fit of the MLP or the conv net, written with the layers (``"mlp"``, ``"conv"``) or made from a torch
    module (``"module-mlp"``, ``"module-conv"``: :func:`bnn.models.from_module`), with the Laplace ``options``."""
    x, y, x_test = data(task)
    if network.endswith("conv"):
        x, x_test = conv_inputs(x), conv_inputs(x_test)
    outputs = 1 if task == "regression" else CLASSES
    prior, likelihood = GaussianPrior(PRIOR_SCALE), likelihood_of(task)
    if network == "mlp":
        model = BayesianMLP(INPUTS, outputs, hidden=(HIDDEN,), activation="tanh", prior=prior, likelihood=likelihood)
    elif network == "conv":
        model = ConvNet(outputs, prior=prior, likelihood=likelihood)
    else:
        model = from_module(torch_module(network, outputs), prior=prior, likelihood=likelihood, in_features=x.shape[1])
    # both sides work at the same weights, which need not be the mode: a short MAP fit is enough
    posterior = fit(model, (x, y), "laplace", structure=structure, tune_prior_precision=False, map_steps=300,
                    map_tolerance=10.0, num_samples=2, seed=0, progress=False, **options)
    return model, posterior, x, y, x_test


def peer_network(model, theta: torch.Tensor) -> torch.nn.Module:
    """The collection's network as a torch module holding ``theta``: a torch module's own, or :func:`torch_module`."""
    if isinstance(model, TorchModuleNetwork):
        network, paths = copy.deepcopy(model.module), {}
    elif isinstance(model, ConvNet):
        network, paths = torch_module("module-conv", model.out_features), {"conv": "1", "out": "4"}
    else:
        network, paths = torch_module("module-mlp", model.out_features), {"layers.0": "0", "layers.1": "2"}
    with torch.no_grad():
        for name, value in split_flat(model.sites, theta).items():
            group, _, kind = name.rpartition(".")
            network.get_parameter(f"{paths.get(group, group)}.{kind}").copy_(value)
    return network


def peer_settings(task: str, x, y) -> tuple[str, dict, torch.utils.data.DataLoader]:
    """laplace-torch's likelihood, its backend, noise and prior precision as the collection's fit has them, and the
    training data as one batch."""
    likelihood = "regression" if task == "regression" else "classification"
    settings = dict(backend=CurvlinopsGGN, sigma_noise=NOISE if task == "regression" else 1.0,
                    prior_precision=PRIOR_SCALE**-2)
    targets = y.unsqueeze(-1) if task == "regression" else y
    return likelihood, settings, torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, targets),
                                                             batch_size=len(x))


def peer_fit(task: str, structure: str, network, x, y, **subnetwork):
    subset, hessian = PEER_NAMES[structure]
    likelihood, settings, loader = peer_settings(task, x, y)
    peer = Laplace(network, likelihood, subset_of_weights=subset, hessian_structure=hessian, **settings, **subnetwork)
    peer.fit(loader)
    return peer


def peer_subnetwork_fit(task: str, network, x, y, size: int):
    """laplace-torch's ``SubnetLaplace`` over the ``size`` weights its ``LargestVarianceDiagLaplaceSubnetMask`` picks
    by the variances of its own diagonal Laplace approximation."""
    likelihood, settings, loader = peer_settings(task, x, y)
    diagonal = Laplace(network, likelihood, subset_of_weights="all", hessian_structure="diag", **settings)
    indices = LargestVarianceDiagLaplaceSubnetMask(network, size, diagonal).select(loader)
    return peer_fit(task, "subnetwork", network, x, y, subnetwork_indices=indices)


def assert_glm_predictive_matches(task: str, model, posterior, peer, x_test) -> None:
    """The GLM predictive's mean and covariance of the network output; for a classifier, both links' probabilities."""
    mean, covariance = posterior.linearization.output_moments(model, x_test)
    peer_mean, peer_covariance = peer._glm_predictive_distribution(x_test)
    torch.testing.assert_close(mean, peer_mean, **ROUND_OFF)
    torch.testing.assert_close(covariance, peer_covariance, rtol=1e-8, atol=1e-11)
    if task == "classification":  # the multi-class probit link of both, and the Laplace bridge
        ours_probs = posterior.predict(x_test, num_samples=2, predictive="linearized").probs
        torch.testing.assert_close(ours_probs, peer(x_test, pred_type="glm", link_approx="probit"), rtol=1e-8, atol=1e-11)
        bridge = Linearization(posterior.linearization.guide, "bridge").predict(model, x_test, 2).probs
        torch.testing.assert_close(bridge, peer(x_test, pred_type="glm", link_approx="bridge"), rtol=1e-8, atol=1e-11)


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
    assert_glm_predictive_matches(task, model, posterior, peer, x_test)


SUBNETWORK_SIZE = 12
"""Of the MLP's 31 (regression) or 45 (three classes) weights."""


@pytest.mark.long
@pytest.mark.parametrize("task", ["regression", pytest.param("classification", marks=pytest.mark.slow)])
def test_subnetwork_choice_precision_evidence_and_glm_predictive_match_laplace_torch(task):
    """laplace-torch's SubnetLaplace over the weights of its LargestVarianceDiagLaplaceSubnetMask: the same weights,
    the full precision's block over them, its inverse, the subnetwork's evidence and the GLM predictive."""
    model, posterior, x, y, x_test = collection_fit(task, "subnetwork", subnetwork_size=SUBNETWORK_SIZE)
    guide = posterior.linearization.guide
    network = peer_network(model, guide.mean)
    peer = peer_subnetwork_fit(task, network, x, y, SUBNETWORK_SIZE)
    assert posterior.record.subnetwork_indices == peer.backend.subnetwork_indices.tolist()
    full = posterior_precision(model, x, y, split_flat(model.sites, guide.mean))
    torch.testing.assert_close(full[guide.indices][:, guide.indices], peer.posterior_precision, **ROUND_OFF)
    torch.testing.assert_close(guide.covariance(), peer.posterior_covariance, rtol=1e-8, atol=1e-11)
    assert posterior.record.log_marginal_likelihood == pytest.approx(peer.log_marginal_likelihood().item(), rel=1e-10)
    assert_glm_predictive_matches(task, model, posterior, peer, x_test)


def test_the_laplace_bridge_is_laplace_torchs_at_the_same_logit_moments():
    # laplace-torch's link applied to given moments of the logits (its GLM moments are checked against ours above)
    generator = torch.Generator().manual_seed(0)
    mean = 2 * torch.randn(6, 4, generator=generator, dtype=torch.float64)
    factor = torch.randn(6, 4, 4, generator=generator, dtype=torch.float64)
    covariance = factor @ factor.transpose(-1, -2) + 0.1 * torch.eye(4, dtype=torch.float64)
    peer = Laplace(torch.nn.Linear(3, 4), "classification", subset_of_weights="all", hessian_structure="full")
    peer._glm_predictive_distribution = lambda x, joint=False: (mean.clone(), covariance.clone())
    theirs = peer(torch.zeros(6, 3), pred_type="glm", link_approx="bridge")
    torch.testing.assert_close(laplace_bridge(mean, covariance), theirs, rtol=1e-12, atol=1e-15)


KRON_CASES = [("regression", "mlp"), ("regression", "module-mlp"), ("classification", "module-conv"),
              *(pytest.param(task, network, marks=pytest.mark.slow) for task, network in
                [("classification", "mlp"), ("regression", "conv"), ("classification", "conv"),
                 ("classification", "module-mlp"), ("regression", "module-conv")])]
"""The collection's MLP, and a torch module's Linear and Conv2d layers, in the default run; every other pairing in the
slow one."""


@pytest.mark.long
@pytest.mark.parametrize(("task", "network"), KRON_CASES)
def test_kron_factors_evidence_and_glm_predictive_match_laplace_torch(task, network):
    """laplace-torch's KronLaplace (curvlinops KFAC-expand, weight and bias apart): each layer's G (x) A and bias G,
    the covariance, the evidence and the GLM predictive, at the same weights; on a network written with the layers and
    on a torch module's nn.Linear and nn.Conv2d layers (structure='kron' of from_module)."""
    model, posterior, x, y, x_test = collection_fit(task, "kron", network)
    assert posterior.record.structure == "kron"
    guide = posterior.linearization.guide
    theta = guide.mean
    peer_net = peer_network(model, theta)
    torch.testing.assert_close(peer_net(x_test), model.forward(x_test, split_flat(model.sites, theta)), **ROUND_OFF)
    peer = peer_fit(task, "kron", peer_net, x, y)

    ours = kron_factors(model, x, theta, posterior.extras["guide"].constants)
    theirs = peer.H_facs.kfacs  # [G, A] for each weight, [G] for each bias, scaled by the loss's factor
    assert len(theirs) == 2 * len(ours)
    for layer, (weight_factors, bias_factors) in zip(ours, zip(theirs[::2], theirs[1::2])):
        torch.testing.assert_close(torch.kron(layer.gradients_factor, layer.inputs_factor),
                                   peer._H_factor * torch.kron(*weight_factors), **ROUND_OFF)
        torch.testing.assert_close(layer.gradients_factor, peer._H_factor * bias_factors[0], **ROUND_OFF)
    torch.testing.assert_close(guide.covariance(), peer.posterior_precision.to_matrix(exponent=-1), rtol=1e-8,
                               atol=1e-11)
    assert posterior.record.log_marginal_likelihood == pytest.approx(peer.log_marginal_likelihood().item(), rel=1e-10)
    assert_glm_predictive_matches(task, model, posterior, peer, x_test)
