from __future__ import annotations

import math
from dataclasses import dataclass

import pyro.distributions as dist
import pytest
import torch
from bnn.models import PRIORS, BayesianMLP, GaussianPrior, LaplacePrior, Prior, ScaleMixturePrior, get_prior
from bnn.models.network import MAX_DRAWN_WEIGHTS
from bnn.models.priors import register_prior
from bnn.models.scale_mixture import ScaleMixtureNormal
from bnn.models.sites import WeightSite

from tests.support.prior_examples import FIXED, example_prior

SITE = WeightSite("layers.1.weight", 1, torch.Size([3, 4]), fan_in=4)


@pytest.mark.parametrize("name", FIXED)  # the hierarchical ones: tests/models/test_hierarchical_priors.py
def test_registered_priors_give_site_shaped_distributions(name):
    d = example_prior(name, [SITE]).distribution(SITE)
    assert d.batch_shape == SITE.shape and d.event_shape == ()
    assert torch.isfinite(d.log_prob(torch.randn(SITE.shape))).all()


@pytest.mark.parametrize("name", PRIORS.names())
def test_config_round_trips(name):
    prior = example_prior(name, [SITE])
    assert get_prior(prior.config()) == prior


def test_gaussian_prior_density_and_fan_in_scaling():
    w = torch.randn(SITE.shape)
    expected = torch.distributions.Normal(0.0, 2.0 / math.sqrt(4)).log_prob(w)
    torch.testing.assert_close(GaussianPrior(2.0, fan_in_scaling=True).distribution(SITE).log_prob(w), expected)
    torch.testing.assert_close(GaussianPrior(2.0).distribution(SITE).log_prob(w), dist.Normal(0.0, 2.0).log_prob(w))


def test_laplace_prior_is_the_l1_density():
    w = torch.tensor([-2.0, 0.0, 0.5])
    site = WeightSite("layers.0.bias", 0, torch.Size([3]), 1)
    torch.testing.assert_close(LaplacePrior(0.5).distribution(site).log_prob(w), -w.abs() / 0.5 - math.log(2 * 0.5))


def test_scale_mixture_matches_the_density_where_it_does_not_underflow():
    pi, s1, s2 = 0.3, 1.0, 0.05
    w = torch.linspace(-3, 3, 41, dtype=torch.float64)
    density = pi * torch.exp(dist.Normal(0.0, s1).log_prob(w)) + (1 - pi) * torch.exp(dist.Normal(0.0, s2).log_prob(w))
    torch.testing.assert_close(ScaleMixtureNormal(pi, s1, s2).log_prob(w), density.log())


def test_scale_mixture_log_density_stays_finite_far_in_the_tail():
    # in float32 the narrow component's density underflows to 0 long before w = 20;
    # log(pi N(w; 0, s1^2)) is still -200.9 there and must not become -inf
    w = torch.tensor([20.0])
    log_p = ScaleMixtureNormal(0.5, 1.0, math.exp(-6)).log_prob(w)
    assert torch.isfinite(log_p).all()
    torch.testing.assert_close(log_p, dist.Normal(0.0, 1.0).log_prob(w) + math.log(0.5))


def test_scale_mixture_draws_have_the_mixture_variance():
    d = ScaleMixtureNormal(0.25, 2.0, 0.1, torch.Size([200_000]))
    torch.manual_seed(0)
    draws = d.sample()
    variance = 0.25 * 4.0 + 0.75 * 0.01
    # the variance of a sample variance is (m4 - var^2)/n with m4 = 3 sum pi_k s_k^4
    m4 = 3 * (0.25 * 16 + 0.75 * 1e-4)
    assert abs(draws.var().item() - variance) < 4 * math.sqrt((m4 - variance**2) / draws.numel())


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GaussianPrior(0.0), "scale must be a positive"),
        (lambda: GaussianPrior(float("nan")), "scale must be a positive"),
        (lambda: LaplacePrior(-1.0), "scale must be a positive"),
        (lambda: GaussianPrior(True), "scale must be a positive finite number, got True"),
        (lambda: LaplacePrior(scale=True), "scale must be a positive finite number, got True"),
        (lambda: ScaleMixturePrior(sigma1=True), "sigma1 must be a positive finite number, got True"),
        (lambda: GaussianPrior(fan_in_scaling="maybe"), "fan_in_scaling must be True or False .*got 'maybe'"),
        (lambda: GaussianPrior(fan_in_scaling=1), "fan_in_scaling must be True or False .*got 1"),
        (lambda: ScaleMixturePrior(pi=1.0), "pi must lie strictly between 0 and 1"),
        (lambda: ScaleMixturePrior(sigma2=0.0), "sigma2 must be a positive"),
        (lambda: get_prior("cauchy"), "unknown prior 'cauchy'; choose from"),
        (lambda: get_prior({"name": "gaussian", "sd": 1.0}), "bad options for prior 'gaussian'"),
        (lambda: get_prior(3.0), "a prior must be a Prior"),
    ],
)
def test_bad_priors_are_refused_with_a_clear_message(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_user_prior_takes_a_few_lines_and_works_by_name():
    @dataclass(frozen=True)
    class StudentTPrior(Prior):
        df: float = 3.0

        def distribution(self, site):
            return dist.StudentT(self.df, 0.0, 1.0).expand(site.shape)

    register_prior("test-student-t", StudentTPrior)
    model = BayesianMLP(2, 1, hidden=(3,), prior="test-student-t")
    assert isinstance(model.prior["layers.0.weight"], StudentTPrior)
    assert model.config()["prior"] == {"*": {"name": "test-student-t", "df": 3.0}}
    with pytest.raises(ValueError, match="already registered"):
        register_prior("test-student-t", GaussianPrior)


@dataclass(frozen=True)
class UserPrior(Prior):
    """A user-written prior whose distribution :attr:`make` builds from the site."""

    make: object

    def distribution(self, site):
        return self.make(site)


@pytest.mark.parametrize("make, message", [
    (lambda site: dist.Normal(0.0, -1.0, validate_args=False).expand(site.shape),
     r"the prior UserPrior of site 'layers.0.weight' cannot be drawn from \(normal expects all elements of std >= 0.0\)"
     r": check its parameters \(a scale must be positive\)"),
    (lambda site: dist.Normal(0.0, 1.0).expand((7,)),
     r"the prior UserPrior of site 'layers.0.weight' gives a distribution of shape \(7,\); the site's is \(3, 2\)"),
    (lambda site: dist.Laplace(torch.zeros(site.shape), torch.full(site.shape, -1.0), validate_args=False),
     "draws values whose log-density is not finite"),
])
def test_a_user_prior_that_cannot_serve_a_site_is_refused_when_given_not_during_a_fit(make, message):
    state = torch.get_rng_state()
    with pytest.raises(ValueError, match=message):
        BayesianMLP(2, 1, hidden=(3,), prior=UserPrior(make))
    model = BayesianMLP(2, 1, hidden=(3,))
    with pytest.raises(ValueError, match=message):
        model.prior = UserPrior(make)
    assert torch.equal(torch.get_rng_state(), state)  # the check's draw leaves torch's generator as it was


def test_an_improper_user_prior_is_accepted_without_a_draw():
    model = BayesianMLP(2, 1, hidden=(3,), prior=UserPrior(
        lambda site: dist.ImproperUniform(dist.constraints.real, site.shape, ())))
    assert isinstance(model.prior["layers.0.weight"], UserPrior)


def test_a_site_too_big_to_draw_is_checked_for_its_shape_alone():
    # 4e9 hidden units: a draw of the first site would take 32 GB; the fit's memory check, not this one, refuses it
    huge = BayesianMLP(1, 1, hidden=(4_000_000_000,))
    assert huge.sites[0].numel > MAX_DRAWN_WEIGHTS
    with pytest.raises(ValueError, match=r"gives a distribution of shape \(7,\)"):  # the shape is still checked
        huge.prior = UserPrior(lambda site: dist.Normal(0.0, 1.0).expand((7,)))
