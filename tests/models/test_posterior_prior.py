from __future__ import annotations

import json

import pyro.distributions as dist
import pytest
import torch
from bnn.models import BayesianMLP, GaussianPrior, MultiHeadMLP, PosteriorPrior, get_prior

from tests.support.prior_examples import example_prior


def model() -> BayesianMLP:
    return BayesianMLP(2, 1, hidden=(3,))


def test_each_weight_has_its_own_normal():
    site = model().sites[0]
    prior = example_prior("posterior", model().sites)
    value = torch.randn(site.shape)
    expected = dist.Normal(prior.loc[site.name], prior.scale[site.name]).log_prob(value)
    torch.testing.assert_close(prior.distribution(site).log_prob(value), expected)
    assert prior.distribution(site).batch_shape == site.shape


def test_config_is_json_and_round_trips_exactly():
    prior = example_prior("posterior", model().sites)
    again = get_prior(json.loads(json.dumps(prior.config())))
    assert isinstance(again, PosteriorPrior) and again == prior and again.source == "test"


def test_a_model_with_the_prior_round_trips_through_its_config():
    first = model()
    first.prior = {"*": example_prior("posterior", first.sites), "layers.1": GaussianPrior(0.5)}
    rebuilt = BayesianMLP.from_config(json.loads(json.dumps(first.config())))
    assert rebuilt.prior == first.prior


def test_per_layer_mapping_gives_a_new_head_the_first_prior():
    net = MultiHeadMLP(2, 2, num_heads=3, hidden=(4,), likelihood="categorical")
    carried = example_prior("posterior", [site for site in net.sites if not site.name.startswith("heads.2")])
    net.prior = {"*": carried, "heads.2": "gaussian"}
    assert net.prior["heads.1.weight"] is carried and net.prior["heads.2.bias"] == GaussianPrior()
    with pytest.raises(ValueError, match="not 'heads.2.weight'.*'heads.2': 'gaussian'"):
        net.prior = carried


@pytest.mark.parametrize(
    "loc, scale, message",
    [
        ({"a": [1.0]}, {"b": [1.0]}, "same sites"),
        ({"a": [1.0, 2.0]}, {"a": [1.0]}, "loc of shape \\(2,\\) but scale of shape \\(1,\\)"),
        ({"a": [1.0]}, {"a": [0.0]}, "must be positive"),
        ({"a": [float("nan")]}, {"a": [1.0]}, "not finite"),
        ({"a": ["x"]}, {"a": [1.0]}, "not a numeric array"),
        ({}, {}, "non-empty mapping"),
    ],
)
def test_bad_values_are_refused(loc, scale, message):
    with pytest.raises(ValueError, match=message):
        PosteriorPrior(loc, scale)


def test_by_name_alone_it_says_what_it_needs():
    with pytest.raises(ValueError, match="bad options for prior 'posterior'.*loc"):
        get_prior("posterior")
