"""The Laplace guide: one Gaussian draw of the flat weights, split into the model's sites."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.guides.flat_weights import join_sites, num_weights, split_flat
from bnn.guides.laplace import LATENT_SITE, LaplaceGuide
from bnn.models import BayesianMLP
from pyro import poutine
from pyro.infer import Predictive

from bnn.runtime.seeding import seeded

MODEL = BayesianMLP(2, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})
D = num_weights(MODEL.sites)  # 2*3 + 3 + 3 + 1 = 13
LAST = 3 + 1


def random_guide(covered: int, diagonal: bool, seed: int = 0) -> LaplaceGuide:
    generator = torch.Generator().manual_seed(seed)
    mean = torch.randn(D, generator=generator)
    if diagonal:
        scale = torch.rand(covered, generator=generator) + 0.1
    else:
        scale = torch.tril(torch.randn(covered, covered, generator=generator) * 0.3) + torch.eye(covered)
    return LaplaceGuide(MODEL.sites, mean, scale, covered_from=D - covered, constants={"sigma": torch.tensor(0.3)})


def test_flat_vector_round_trip_keeps_sample_dimensions():
    values = {site.name: torch.randn(5, 4, *site.shape) for site in MODEL.sites}
    flat = join_sites(MODEL.sites, values)
    assert flat.shape == (5, 4, D)
    for name, value in split_flat(MODEL.sites, flat).items():
        assert torch.equal(value, values[name])
    # the last layer's weights and bias are the trailing entries
    assert torch.equal(flat[..., -LAST:-1], values["layers.1.weight"].reshape(5, 4, 3))


@pytest.mark.parametrize("covered, diagonal", [(D, False), (D, True), (LAST, False)])
def test_draws_have_the_guides_mean_and_covariance(covered, diagonal):
    guide = random_guide(covered, diagonal)
    num = 20000
    with seeded(0), pyro.plate("draws", num, dim=-2):
        trace = poutine.trace(guide).get_trace(torch.zeros(4, 2))
    flat = join_sites(MODEL.sites, {s.name: trace.nodes[s.name]["value"].reshape(num, *s.shape) for s in MODEL.sites})
    covariance = guide.covariance()
    mean_error = (flat.mean(0) - guide.mean)[-covered:]
    # 5 standard errors of a mean of `num` draws
    assert torch.all(mean_error.abs() < 5 * (covariance.diagonal() / num).sqrt())
    # covariance entries: sd of a sample covariance is sqrt((S_ii S_jj + S_ij^2) / num)
    empirical = torch.cov(flat[:, -covered:].T)
    tolerance = 5 * ((torch.outer(covariance.diagonal(), covariance.diagonal()) + covariance**2) / num).sqrt()
    assert torch.all((empirical - covariance).abs() < tolerance)
    # weights outside the covered block stay at the mean; the noise is the constant
    assert torch.equal(flat[:, : D - covered], guide.mean[: D - covered].expand(num, -1))
    assert torch.all(trace.nodes["sigma"]["value"] == 0.3)


def test_guide_log_density_is_the_gaussian_of_the_flat_draw():
    guide = random_guide(D, diagonal=False)
    with seeded(1):
        trace = poutine.trace(guide).get_trace(torch.zeros(4, 2))
    trace.compute_log_prob()
    expected = guide.covered_distribution().log_prob(trace.nodes[LATENT_SITE]["value"])
    total = sum(node["log_prob_sum"] for node in trace.nodes.values() if node["type"] == "sample")
    torch.testing.assert_close(total, expected)


def test_full_factor_density_is_the_multivariate_normal_of_its_factor():
    guide = random_guide(D, diagonal=False)
    values = torch.randn(3, 2, D, generator=torch.Generator().manual_seed(4))
    expected = torch.distributions.MultivariateNormal(guide.mean, scale_tril=guide.scale).log_prob(values)
    torch.testing.assert_close(guide.covered_distribution().log_prob(values), expected)


def test_predictive_runs_the_model_with_the_guide():
    guide = random_guide(LAST, diagonal=False)
    x = torch.randn(7, 2)
    with seeded(2):
        samples = Predictive(MODEL, guide=guide, num_samples=50, parallel=True)(x)
    assert samples["obs"].shape == (50, 7)
    assert samples["layers.1.weight"].shape[-2:] == (1, 3)
    assert torch.all(samples["sigma"] == 0.3)
    # the first layer is fixed at the mean, so every draw shares it
    first = samples["layers.0.weight"].reshape(50, 3, 2)
    assert torch.equal(first, split_flat(MODEL.sites, guide.mean)["layers.0.weight"].expand(50, 3, 2))


def test_state_round_trip():
    guide = random_guide(LAST, diagonal=True)
    again = LaplaceGuide.from_state(MODEL.sites, guide.state())
    assert torch.equal(again.mean, guide.mean) and torch.equal(again.scale, guide.scale)
    assert again.covered_from == guide.covered_from and again.constants == guide.constants


@pytest.mark.parametrize(
    "mean, scale, covered_from, message",
    [
        (torch.zeros(D - 1), torch.ones(D), 0, "mean must have shape"),
        (torch.zeros(D), torch.ones(D - 1), 0, "scale must have shape"),
        (torch.zeros(D), torch.ones(2), D, "covered_from must lie in"),
    ],
)
def test_bad_shapes_are_refused(mean, scale, covered_from, message):
    with pytest.raises(ValueError, match=message):
        LaplaceGuide(MODEL.sites, mean, scale, covered_from=covered_from)


SUBNETWORK = torch.tensor([1, 4, 5, 11])


def test_a_subnetwork_guide_draws_the_factor_at_its_indices_and_the_mean_elsewhere():
    generator = torch.Generator().manual_seed(5)
    mean = torch.randn(D, generator=generator)
    scale = torch.tril(torch.randn(4, 4, generator=generator) * 0.3) + torch.eye(4)
    guide = LaplaceGuide(MODEL.sites, mean, scale, indices=SUBNETWORK)
    with seeded(3), pyro.plate("draws", 6, dim=-2):
        trace = poutine.trace(guide).get_trace(torch.zeros(4, 2))
    flat = join_sites(MODEL.sites, {s.name: trace.nodes[s.name]["value"].reshape(6, *s.shape) for s in MODEL.sites})
    covered = trace.nodes[LATENT_SITE]["value"].reshape(6, 4)  # the covered entries' draws, mean + S z
    torch.testing.assert_close(flat[:, SUBNETWORK], covered)
    outside = torch.ones(D, dtype=torch.bool)
    outside[SUBNETWORK] = False
    assert torch.equal(flat[:, outside], mean[outside].expand(6, -1))
    assert torch.equal(guide.covered_part(mean), mean[SUBNETWORK])
    again = LaplaceGuide.from_state(MODEL.sites, guide.state())
    assert torch.equal(again.indices, SUBNETWORK) and torch.equal(again.scale, scale)
    assert repr(again) == f"LaplaceGuide(full Gaussian over 4 of {D} weights)"


@pytest.mark.parametrize(
    "indices, covered_from, message",
    [
        (torch.tensor([3, 1]), 0, "indices must be increasing positions in 0..12"),
        (torch.tensor([1, D]), 0, "indices must be increasing positions in 0..12"),
        (torch.tensor([1.0, 2.0]), 0, "indices must be a non-empty 1-D long tensor"),
        (torch.tensor([1, 2]), 3, "indices and covered_from=3 both choose"),
    ],
)
def test_bad_subnetwork_indices_are_refused(indices, covered_from, message):
    with pytest.raises(ValueError, match=message):
        LaplaceGuide(MODEL.sites, torch.zeros(D), torch.ones(2), covered_from=covered_from, indices=indices)
