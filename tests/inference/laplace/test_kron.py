"""The Kronecker-factored Laplace (``structure="kron"``): its layers, its factors against the exact GGN where KFAC is
exact, its draws, its refusals and the default structure's switch to it. Its agreement with laplace-torch's
``KronLaplace`` is in ``test_laplace_torch_peer.py``."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from bnn.guides.flat_weights import join_sites, num_weights
from bnn.guides.laplace import LaplaceGuide
from bnn.inference import fit
from bnn.inference.core.weight_gaussians import weight_gaussians
from bnn.inference.curvature import gauss_newton
from bnn.inference.curvature.kron_curvature import kron_factors, kron_posterior
from bnn.inference.curvature.output_curvature import gauss_newton_matrix
from bnn.inference.laplace.curvature import HessianType, Structure, required_bytes
from bnn.inference.laplace.default_structure import choose_structure
from bnn.inference.laplace.linearized import Linearization
from bnn.inference.laplace.options import LaplaceOptions
from bnn.models import BayesianMLP, GaussianPrior, from_module
from bnn.models.layers import conv, linear, recording
from torch import nn

from tests.models.test_network import SkipNet

pytestmark = pytest.mark.usefixtures("float64")
ROUND_OFF = dict(rtol=1e-12, atol=1e-12)
QUICK = dict(map_steps=200, map_tolerance=10.0, tune_prior_precision=False, progress=False, seed=0)


def data(rows: int = 40, inputs: int = 3):
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(rows, inputs, generator=generator)
    return x, torch.sin(x[:, 0]) + 0.5 * x[:, -1] + 0.3 * torch.randn(rows, generator=generator)


def test_linear_equals_torch_linear_draw_by_draw():
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(2, 3, 4, 5, generator=generator), torch.randn(2, 3, 4, generator=generator)
    shared, batched = torch.randn(6, 5, generator=generator), torch.randn(2, 3, 6, 5, generator=generator)
    for h in (shared, batched):
        out = linear(h, weight, bias, name="layer")
        assert out.shape == (2, 3, 6, 4)
        for i in range(2):
            for j in range(3):
                torch.testing.assert_close(out[i, j], F.linear(h if h.dim() == 2 else h[i, j], weight[i, j], bias[i, j]),
                                           **ROUND_OFF)


@pytest.mark.parametrize(("kernel", "spatial", "stride", "padding"), [((3,), (9,), 2, 1), ((2, 3), (5, 6), 1, (1, 0))])
def test_conv_equals_torch_conv_draw_by_draw(kernel, spatial, stride, padding):
    generator = torch.Generator().manual_seed(1)
    weight, bias = torch.randn(2, 3, 4, 2, *kernel, generator=generator), torch.randn(2, 3, 4, generator=generator)
    shared, batched = torch.randn(5, 2, *spatial, generator=generator), torch.randn(2, 3, 5, 2, *spatial,
                                                                                    generator=generator)
    reference = F.conv1d if len(kernel) == 1 else F.conv2d
    for h in (shared, batched):
        out = conv(h, weight, bias, name="layer", stride=stride, padding=padding)
        for i in range(2):
            for j in range(3):
                expected = reference(h if h.dim() == len(kernel) + 2 else h[i, j], weight[i, j], bias[i, j],
                                     stride=stride, padding=padding)
                torch.testing.assert_close(out[i, j], expected, **ROUND_OFF)


def test_conv_records_patches_whose_product_with_the_weight_is_the_output():
    """The recorded inputs are the unfolded patches: ``patches @ weight.flatten(1).T + bias`` is the output."""
    generator = torch.Generator().manual_seed(2)
    h, weight, bias = torch.randn(4, 2, 7, generator=generator), torch.randn(3, 2, 3, generator=generator), torch.randn(3)
    with recording() as layers:
        out = conv(h, weight, bias, name="c", stride=2, padding=1)
    torch.testing.assert_close(layers["c"].inputs @ weight.flatten(1).T + bias, out.transpose(1, 2), **ROUND_OFF)
    assert not layers["c"].tap.any()


def test_one_linear_layer_with_one_output_kron_blocks_are_the_ggn_blocks():
    """With one linear layer, one output and a Gaussian likelihood, J_i = [x_i, 1] and H_i = 1/sigma^2 for every row,
    so the GGN's weight block sum_i x_i x_i^T / sigma^2 factors exactly as G (x) A with G = N / sigma^2 and A = the
    mean of x_i x_i^T, and its bias block is N / sigma^2 = G; KFAC (weight and bias apart, as laplace-torch) drops only
    the weight-bias cross block sum_i x_i / sigma^2."""
    x, _ = data()
    model = BayesianMLP(3, 1, hidden=(), likelihood={"name": "gaussian", "scale": 0.3})
    theta = torch.randn(num_weights(model.sites), generator=torch.Generator().manual_seed(0))
    ggn = gauss_newton_matrix(model, x, theta, {})
    (layer,) = kron_factors(model, x, theta, {})
    torch.testing.assert_close(torch.kron(layer.gradients_factor, layer.inputs_factor), ggn[:3, :3], **ROUND_OFF)
    torch.testing.assert_close(layer.gradients_factor, ggn[3:, 3:], **ROUND_OFF)
    precision = torch.linalg.inv(kron_posterior(model, x, theta, {}, torch.full((4,), 2.0)).dense())
    expected = torch.block_diag(ggn[:3, :3], ggn[3:, 3:]) + 2.0 * torch.eye(4)
    torch.testing.assert_close(precision, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.long
def test_draws_have_the_covariance_of_the_factors_and_the_precision_diagonal_theirs():
    """20,000 draws from the fitted guide: each entry of their covariance within 5 Monte Carlo standard errors,
    sqrt((C_ii C_jj + C_ij^2) / n), of the factors' covariance; the means within 5 standard errors of the MAP."""
    x, y = data()
    model = BayesianMLP(3, 1, hidden=(3,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": 0.3})
    draws = 20_000
    posterior = fit(model, (x, y), "laplace", structure="kron", num_samples=draws, **QUICK)
    guide = posterior.extras["guide"]
    flat = join_sites(model.sites, {site.name: posterior.samples[site.name][0] for site in model.sites})
    covariance = guide.covariance()
    standard_error = ((covariance.diagonal()[:, None] * covariance.diagonal()[None, :] + covariance**2) / draws).sqrt()
    assert ((torch.cov(flat.T) - covariance).abs() <= 5 * standard_error).all()
    assert ((flat.mean(0) - guide.mean).abs() <= 5 * (covariance.diagonal() / draws).sqrt()).all()
    precision = torch.linalg.inv(covariance)
    std = weight_gaussians(posterior)
    prior_std = join_sites(model.sites, {site.name: std.scale[site.name] for site in model.sites})
    torch.testing.assert_close(prior_std, precision.diagonal().rsqrt(), rtol=1e-8, atol=0)


def test_linearization_saved_and_loaded_gives_the_same_moments(tmp_path):
    x, _ = data()
    model = BayesianMLP(3, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    theta = torch.randn(num_weights(model.sites), generator=torch.Generator().manual_seed(0))
    guide = LaplaceGuide(model.sites, theta, kron_posterior(model, x, theta, {}, torch.ones_like(theta)))
    Linearization(guide).save(tmp_path / "lin.pt")
    loaded = Linearization.load(tmp_path / "lin.pt", model)
    for ours, theirs in zip(Linearization(guide).output_moments(model, x), loaded.output_moments(model, x)):
        torch.testing.assert_close(ours, theirs, **ROUND_OFF)


class LayeredSkipNet(SkipNet):
    """The test network's hidden and output layers written with :func:`~bnn.models.layers.linear`, its skip connection
    (a weight without a bias) with a plain ``matmul``."""

    def forward(self, x, w):
        h = torch.tanh(linear(x, w["hidden.weight"], w["hidden.bias"], name="hidden"))
        return x @ w["skip.weight"].transpose(-1, -2) + linear(h, w["out.weight"], w["out.bias"], name="out")


@pytest.mark.parametrize("network", [SkipNet, LayeredSkipNet])
def test_kron_refuses_a_network_not_written_with_the_layers_before_any_work(network):
    x, y = data(inputs=1)
    first = "hidden.weight" if network is SkipNet else "skip.weight"
    with pytest.raises(ValueError, match=rf"structure='kron' needs every layer written with bnn.models.layers.linear/"
                                         rf"conv; {network.__name__}'s '{first}' is not; use 'full', 'diag' or 'last-la"):
        fit(network(1), (x, y), "laplace", structure="kron", **QUICK)


def test_a_torch_modules_linear_layers_have_the_factors_of_the_same_mlp_written_with_the_layers():
    """from_module(Linear, Tanh, Linear) at the weights of a BayesianMLP: the same factors, layer by layer, and the
    default structure above the memory limit is kron for both."""
    x, _ = data()
    mlp = BayesianMLP(3, 2, hidden=(4,), likelihood="categorical")
    module = from_module(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), likelihood="categorical")
    theta = torch.randn(num_weights(mlp.sites), generator=torch.Generator().manual_seed(0))
    factors = kron_factors(module, x, theta, {})
    assert [(layer.weight_site, layer.bias_site) for layer in factors] == [("0.weight", "0.bias"), ("2.weight", "2.bias")]
    for ours, theirs in zip(factors, kron_factors(mlp, x, theta, {}), strict=True):
        torch.testing.assert_close(ours.inputs_factor, theirs.inputs_factor, **ROUND_OFF)
        torch.testing.assert_close(ours.gradients_factor, theirs.gradients_factor, **ROUND_OFF)
    for model in (mlp, module):
        structure, reason = choose_structure(model, x, HessianType.GGN, 8, max_memory_gib=1e-5)  # full: 2.5e-5 GiB
        assert structure is Structure.KRON and "every layer has Kronecker factors" in reason


@pytest.mark.parametrize(("module", "site", "layer"), [
    (nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1)), "1.weight", "LayerNorm"),
    (nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(), nn.Linear(4, 1)), "0.weight",
     "Linear(in_features=3, out_features=4, bias=False)"),
    (nn.Sequential(nn.Unflatten(1, (1, 3)), nn.Conv1d(1, 2, 2), nn.Flatten(), nn.Linear(4, 1)), "1.weight", "Conv1d"),
])
def test_kron_refuses_a_torch_module_naming_the_layer_it_cannot_factor_before_any_work(module, site, layer):
    x, y = data()
    model = from_module(module, in_features=3, likelihood={"name": "gaussian", "scale": 0.3})
    with pytest.raises(ValueError, match=rf"structure='kron' takes a module's nn.Linear layers .* and nn.Conv2d layers "
                                         rf".*; '{site}' is in layer '{site[0]}', {re.escape(layer)}.*use 'full', 'diag"):
        fit(model, (x, y), "laplace", structure="kron", **QUICK)
    structure, reason = choose_structure(model, x, HessianType.GGN, 8, max_memory_gib=1e-6)  # below the full GGN's
    assert structure is Structure.FULL and f"'{site}' is in layer" in reason


def test_default_structure_is_kron_where_the_full_ggn_fits_but_costs_more_than_a_polish_step(monkeypatch):
    """Where the full GGN fits in memory but a Levenberg-Marquardt step over every weight is not affordable (here made
    so: no network qualifies), the default takes kron and says why; a tempered fit, which has no kron, and a network
    that cannot take it keep full."""
    x, _ = data()
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", 0)
    model = BayesianMLP(3, 1, hidden=(3,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": 0.3})
    structure, reason = choose_structure(model, x, HessianType.GGN, 8, max_memory_gib=2.0)
    assert structure is Structure.KRON
    assert "within max_memory_gib=2 but costs" in reason and "Kronecker-factored" in reason
    assert choose_structure(model, x, HessianType.GGN, 8, max_memory_gib=2.0, tempered=True)[0] is Structure.FULL
    skip = choose_structure(SkipNet(1), x[:, :1], HessianType.GGN, 8, max_memory_gib=2.0)
    assert skip[0] is Structure.FULL and "cannot take 'kron'" in skip[1]


def test_kron_refuses_the_exact_hessian():
    x, y = data()
    with pytest.raises(ValueError, match="hessian='exact' with structure='kron' is not offered"):
        fit(BayesianMLP(3, 1), (x, y), "laplace", structure="kron", hessian="exact", **QUICK)


@pytest.mark.long
def test_default_structure_is_full_within_the_memory_limit_and_kron_above_it():
    """Full over D = 16 weights needs 5 x 16^2 x 8 B = 9.5e-6 GiB; below that limit the default takes kron (its
    factors 6.3e-7 GiB), and says why; a network that cannot take kron keeps today's refusal."""
    x, y = data()
    model = BayesianMLP(3, 1, hidden=(3,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": 0.3})
    roomy = fit(model, (x, y), "laplace", num_samples=4, **QUICK).record
    assert roomy.structure == "full" and "within max_memory_gib" in roomy.structure_reason
    tight = fit(model, (x, y), "laplace", num_samples=4, max_memory_gib=5e-6, **QUICK).record
    assert tight.structure == "kron" and tight.metrics()["structure"] == "kron"
    assert "above max_memory_gib=5e-06" in tight.structure_reason and "Kronecker-factored" in tight.structure_reason
    assert math.isfinite(tight.log_marginal_likelihood)
    x_skip, y_skip = data(inputs=1)
    with pytest.raises(ValueError, match="structure 'full' over 14 weights needs about"):
        fit(SkipNet(1), (x_skip, y_skip), "laplace", max_memory_gib=1e-7, **QUICK)


@pytest.mark.long
def test_kron_prior_precision_tuned_by_its_evidence():
    """The tuned multiplier is the one whose Kronecker evidence is largest: the evidence at the chosen multiplier is
    above the evidence at a tenth and at ten times it (each a refit at that multiplier, held)."""
    x, y = data()
    model = BayesianMLP(3, 1, hidden=(4,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": 0.3})
    options = {**QUICK, "tune_prior_precision": True, "map_tolerance": 1e-3, "num_samples": 4}
    tuned = fit(model, (x, y), "laplace", structure="kron", **options).record
    for factor in (0.1, 10.0):
        held = BayesianMLP(3, 1, hidden=(4,), prior=GaussianPrior((tuned.prior_precision_multiplier * factor) ** -0.5),
                           likelihood={"name": "gaussian", "scale": 0.3})
        other = fit(held, (x, y), "laplace", structure="kron", **{**options, "tune_prior_precision": False}).record
        assert other.log_marginal_likelihood < tuned.log_marginal_likelihood


def test_memory_needs_count_the_factors_not_a_dense_matrix():
    """A 8-50-50-1 MLP's factors: (8^2 + 50^2) + (50^2 + 50^2) + (50^2 + 1^2) = 10,065 entries, each with its
    eigenvectors and a work copy: 3 x 10,065 x 8 bytes, against 5 x 3,051^2 x 8 for the full GGN; a fit's peak is
    then its MAP polish, not the curvature."""
    model = BayesianMLP(8, 1, hidden=(50, 50))
    assert required_bytes(Structure.KRON, 3_051, 8, model) == 3 * 10_065 * 8
    assert required_bytes(Structure.FULL, 3_051, 8) == 5 * 3_051**2 * 8
    needs = LaplaceOptions(structure="kron").memory_needs(model)
    assert "the kron curvature (float64)" not in needs and sum(needs.values()) < 5 * 3_051**2 * 8
