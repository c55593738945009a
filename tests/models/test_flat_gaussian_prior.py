"""The closed-form Gaussian prior over the flat weights against the sites' torch distributions."""

import pytest
import torch
from bnn.guides.flat_weights import join_sites
from bnn.inference.map_search.log_joint import log_prior, prior_distributions
from bnn.models import BayesianCNN, BayesianMLP, PosteriorPrior
from bnn.models.flat_gaussian_prior import FlatGaussianPrior

from bnn.runtime.seeding import seeded


def _draws(model, count):
    with seeded(0):
        return join_sites(model.sites, {name: d.sample((count,)) for name, d in prior_distributions(model).items()})


@pytest.mark.parametrize("model", [
    BayesianMLP(3, 1, hidden=(5,), prior={"name": "gaussian", "scale": 0.7}),
    BayesianMLP(3, 2, hidden=(4, 4), prior={"name": "gaussian", "fan_in_scaling": True}),
    BayesianCNN(36, 3, channels=(2,), hidden=(4,), input_shape=(6, 6)),
], ids=["mlp", "fan-in", "cnn"])
def test_equals_the_sum_of_the_sites_normal_log_densities(model):
    """Draws from the prior (and a point 3 sd out), a batch at once: the closed form equals the sites' float32
    ``Normal.log_prob`` summed to float32 rounding, and float64 Normals to the rounding of the float32 scales the
    priors state (relative 1e-7)."""
    theta = torch.cat([_draws(model, 4), 3 * _draws(model, 1)]).to(torch.float64)
    closed = FlatGaussianPrior.of(model).log_prob(theta)
    assert closed.shape == (5,)
    torch.testing.assert_close(closed, torch.stack([log_prior(model, point.float()).double() for point in theta]),
                               rtol=1e-5, atol=1e-3)
    exact = torch.stack([sum(d.log_prob(v.double()).sum() for d, v in zip(
        [torch.distributions.Normal(0.0, float(model.prior[s.name].site_scale(s))) for s in model.sites],
        torch.split(point, [s.numel for s in model.sites]))) for point in theta])
    torch.testing.assert_close(closed, exact, rtol=1e-7, atol=0)


def test_a_prior_centred_away_from_zero_keeps_its_means():
    """A posterior-as-prior (continual learning) has per-weight means and scales: the closed form uses both."""
    model = BayesianMLP(2, 1, hidden=(3,))
    loc = {site.name: torch.randn(site.shape) for site in model.sites}
    scale = {site.name: torch.rand(site.shape) + 0.1 for site in model.sites}
    model.prior = PosteriorPrior(loc, scale)
    theta = _draws(model, 3).double()
    torch.testing.assert_close(FlatGaussianPrior.of(model).log_prob(theta),
                               torch.stack([log_prior(model, point) for point in theta]).double(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("prior", [{"name": "laplace"}, {"name": "scale-mixture"}])
def test_a_prior_that_is_not_gaussian_has_no_closed_form(prior):
    assert FlatGaussianPrior.of(BayesianMLP(2, 1, hidden=(3,), prior=prior)) is None
