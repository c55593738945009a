from __future__ import annotations

from functools import reduce

import pyro
import pytest
import torch
from bnn.guides import GUIDES, autonormal, build_guide
from bnn.guides.registry import GuideFactory
from bnn.models import BayesianMLP
from pyro.infer.autoguide import AutoDiagonalNormal, AutoNormal


@pytest.fixture
def model():
    return BayesianMLP(2, 1, hidden=(3,))


def locs(guide, model):
    x = torch.zeros(4, 2)
    guide(x)  # the prototype trace sets the parameters up
    return {site.name: reduce(getattr, site.name.split("."), guide.locs).detach() for site in model.sites}


def test_init_from_given_weights_and_scale(model):
    given = {"layers.0.weight": torch.full((3, 2), 0.25)}
    with pyro.get_param_store().scope():
        guide = autonormal(model, init_scale=0.03, init_loc=given)
        values = locs(guide, model)
        torch.testing.assert_close(values["layers.0.weight"], given["layers.0.weight"])
        assert not torch.all(values["layers.1.weight"] == 0)  # the rest drawn from the prior
        scale = reduce(getattr, "layers.0.weight".split("."), guide.scales).detach()
        torch.testing.assert_close(scale, torch.full((3, 2), 0.03))


def test_init_at_the_prior_median(model):
    """Pyro estimates the median from 15 prior draws: sd about 1.25/sqrt(15) = 0.32 around 0, against 1 for a draw."""
    pyro.set_rng_seed(0)
    with pyro.get_param_store().scope():
        values = torch.cat([v.flatten() for v in locs(autonormal(model, init_loc="median"), model).values()])
    assert values.abs().mean() < 0.5


@pytest.mark.parametrize(
    "options, message",
    [({"init_scale": 0}, "init_scale must be a positive"), ({"init_loc": "mode"}, "init_loc must be one of")],
)
def test_bad_options(model, options, message):
    with pytest.raises(ValueError, match=message):
        autonormal(model, **options)


def test_build_guide_accepts_names_factories_classes_and_callables(model):
    guide, name = build_guide("autonormal", model, init_scale=0.2)
    assert isinstance(guide, AutoNormal) and name == "autonormal"
    assert isinstance(GUIDES.get("autonormal"), GuideFactory)
    assert build_guide(GUIDES.get("autonormal"), model)[1] == "autonormal"
    guide, name = build_guide(AutoDiagonalNormal, model, init_scale=0.2)
    assert isinstance(guide, AutoDiagonalNormal) and name == "AutoDiagonalNormal"

    def my_guide(x, y=None, num_data=None):
        pass

    assert build_guide(my_guide, model) == (my_guide, "my_guide")
    with pytest.raises(ValueError, match="were given with a ready guide"):
        build_guide(my_guide, model, init_scale=0.1)
    with pytest.raises(ValueError, match="unknown guide 'autonorm'"):
        build_guide("autonorm", model)


@pytest.mark.parametrize(
    "given, message",
    [
        ({"layers.0.weight": torch.zeros(2, 3)}, r"init_loc\['layers.0.weight'\] has shape \(2, 3\), but site "
                                                 r"'layers.0.weight' has shape \(3, 2\); the sites and shapes are: "
                                                 r"layers.0.weight \(3, 2\), layers.0.bias \(3,\)"),
        ({"layer0.weight": torch.zeros(3, 2)}, r"init_loc names \['layer0.weight'\], which are not latent sites"),
        ({"layers.0.bias": torch.tensor([0.0, float("nan"), 0.0])}, r"init_loc\['layers.0.bias'\] has NaN or infinite"),
        ({"layers.0.bias": "abc"}, r"init_loc\['layers.0.bias'\] is not numeric"),
    ],
)
def test_init_loc_mappings_are_checked_against_the_sites(model, given, message):
    with pytest.raises(ValueError, match=message):
        autonormal(model, init_loc=given)


@pytest.mark.parametrize("init_scale", [True, 0, -0.1, float("inf"), "0.1"])
def test_init_scale_must_be_a_positive_number(model, init_scale):
    with pytest.raises(ValueError, match=f"init_scale must be a positive number, got {init_scale!r}"):
        autonormal(model, init_scale=init_scale)


@pytest.mark.parametrize("prior", ["ard", "layer-scale", "horseshoe"])
def test_prior_start_draws_the_weights_and_puts_every_other_latent_at_its_prior_median(prior):
    """A draw of a half-Cauchy scale can start the weights it scales near zero (module notes): the scales and the
    learned noise start at their exact prior medians, the half-Cauchy's its scale, while the weights are drawn."""
    model = BayesianMLP(3, 1, hidden=(4,), prior=prior, likelihood={"name": "gaussian", "scale": None})
    pyro.set_rng_seed(0)
    with pyro.get_param_store().scope():
        guide = autonormal(model)
        guide(torch.zeros(5, 3), torch.zeros(5, 1))
        starts = {name: value.detach() for name, value in guide.median().items()}
    priors = model.non_weight_priors()
    assert set(priors) < set(starts) and "sigma" in priors
    for name, distribution in priors.items():
        base = distribution.base_dist if isinstance(distribution, torch.distributions.Independent) else distribution
        torch.testing.assert_close(starts[name], base.icdf(torch.tensor(0.5)).expand_as(starts[name]))
    weights = torch.cat([starts[name].flatten() for name in starts if name not in priors])
    assert weights.numel() == sum(site.numel for site in model.sites)
    assert weights.std() > 0.5  # standard normal draws of the standardised weights, not their median 0
