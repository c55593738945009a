"""The likelihood temperature (bnn.inference.core.temperature): what it scales, how a fit is named, what refuses it."""

from __future__ import annotations

import re

import pyro
import pytest
import torch
from bnn.inference import fit
from bnn.inference.core.temperature import TEMPERATURES, TemperedLikelihood, parse_temperature, tempered, tempered_label
from bnn.inference.sgmcmc.potential import MinibatchLogJoint
from bnn.models import BayesianMLP, GaussianLikelihood
from bnn.models.network import OBSERVED_SITE
from pyro import poutine


def toy_data(n: int = 10):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(n, 2, generator=generator), torch.randn(n, generator=generator)


def site_log_probs(program, x, y) -> dict[str, torch.Tensor]:
    with pyro.poutine.seed(rng_seed=0):
        trace = poutine.trace(program).get_trace(x, y)
    trace.compute_log_prob()
    return {name: site["log_prob_sum"] for name, site in trace.nodes.items() if site["type"] == "sample"}


def test_only_the_likelihood_site_is_scaled():
    model, (x, y) = BayesianMLP(2, 1, hidden=(3,)), toy_data()
    plain, cold = site_log_probs(model, x, y), site_log_probs(tempered(model, 0.2), x, y)
    assert set(plain) == set(cold)
    for name, value in plain.items():
        expected = value / 0.2 if name == OBSERVED_SITE else value
        torch.testing.assert_close(cold[name], expected)


def test_bayes_is_the_program_itself_and_the_label_says_the_temperature():
    model = BayesianMLP(2, 1)
    assert tempered(model, 1.0) is model
    assert tempered_label("nuts", 1.0) == "nuts"
    assert tempered_label("svi (meanfield)", 0.1) == "svi (meanfield) (T=0.1)"
    with TemperedLikelihood(3.0) as messenger:
        assert messenger.temperature == 3.0


def test_the_sgmcmc_log_joint_weighs_the_likelihood_by_one_over_t():
    model, (x, y) = BayesianMLP(2, 1, hidden=(3,), likelihood=GaussianLikelihood(scale=0.5)), toy_data()
    plain, cold = MinibatchLogJoint(model, x, y, None), MinibatchLogJoint(model, x, y, None, temperature=0.5)
    z = plain.start(2)
    values = plain.constrained(z)
    log_likelihood = torch.stack([model.observation_distribution(x, {name: value[chain] for name, value in values.items()})
                                  .log_prob(y).sum() for chain in range(2)])
    torch.testing.assert_close(cold.log_joint(z, None) - plain.log_joint(z, None), (1 / 0.5 - 1) * log_likelihood)


@pytest.mark.parametrize("method, options, message", [
    ("laplace", {"tune_prior_precision": True}, "leave tune_prior_precision out"),
    ("laplace", {"structure": "kron"}, "structure='kron' is not tempered"),
    ("nuts", {"temperature": 0}, "temperature must be a positive number"),
    ("svi", {"temperature": 1e-300}, "temperature must be a positive number in [2.22e-16, 4.5e+15], got 1e-300: "
                                     "outside it one of the two terms of the tempered potential"),
    ("sgld", {"temperature": 1e300}, "got 1e+300"),
    ("laplace", {"temperature": "0.1"}, "got '0.1'"),
    ("map", {}, "takes no option(s) ['temperature']"),
    ("mc-dropout", {}, "takes no option(s) ['temperature']"),
])
def test_what_refuses_a_temperature_says_why_before_any_work(method, options, message):
    model, data = BayesianMLP(2, 1, hidden=(3,), likelihood=GaussianLikelihood(scale=0.5)), toy_data()
    with pytest.raises(ValueError, match=re.escape(message)):
        fit(model, data, method, **{"temperature": 0.5, **options})


@pytest.mark.parametrize("model, message", [
    (BayesianMLP(2, 1, hidden=(3,), likelihood=GaussianLikelihood(scale=None)), "give the likelihood a fixed noise"),
    (BayesianMLP(2, 1, hidden=(3,), prior="layer-scale", likelihood=GaussianLikelihood(scale=0.5)),
     "sets the scales of hierarchical priors by the evidence"),
])
def test_laplace_refuses_what_the_evidence_would_choose(model, message):
    with pytest.raises(ValueError, match=message):
        fit(model, toy_data(), "laplace", temperature=0.5, structure="full")


def test_the_temperatures_accepted_are_those_where_neither_term_rounds_the_other_away():
    """At the range's ends the likelihood's term scaled by 1/T and the prior's (each of order one) still change each
    other's sum in float64; a step past them, one is lost to rounding."""
    low, high = TEMPERATURES
    one = torch.tensor(1.0, dtype=torch.float64)
    assert one / low + one != one / low and one / (low / 4) + one == one / (low / 4)
    assert one / high + one != one and one / (4 * high) + one == one
    for value in (low, 1, 0.1, high):
        assert parse_temperature("temperature", value) == value
