"""Every model x prior x likelihood: a few SVI steps give a finite ELBO and well-shaped predictions."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.inference import fit
from bnn.inference.core.prediction import MIN_OBSERVATION_DRAWS
from bnn.models import LIKELIHOODS, PRIORS, BayesianMLP

from tests.support.prior_examples import HIERARCHICAL, example_prior

TARGETS = {
    "gaussian": (1, lambda n, g: torch.randn(n, generator=g)),
    "bernoulli": (1, lambda n, g: torch.randint(0, 2, (n,), generator=g).float()),
    "categorical": (3, lambda n, g: torch.randint(0, 3, (n,), generator=g)),
    "heteroscedastic-gaussian": (2, lambda n, g: torch.randn(n, generator=g)),  # a mean and a raw scale
}


@pytest.mark.parametrize("hidden", [(), (6,), pytest.param((5, 4), marks=pytest.mark.long)])
@pytest.mark.parametrize("prior", PRIORS.names())
@pytest.mark.parametrize("likelihood", LIKELIHOODS.names())
def test_a_few_svi_steps(hidden, prior, likelihood):
    out, make_y = TARGETS[likelihood]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(24, 2, generator=generator)
    model = BayesianMLP(2, out, hidden=hidden, likelihood=likelihood)
    model.prior = example_prior(prior, model.sites)
    guide = "autonormal" if prior in HIERARCHICAL else "meanfield"  # the guide that covers latent prior scales
    posterior = fit(model, (x, make_y(24, generator)), guide=guide, steps=5, num_particles=2, num_samples=7,
                    progress=False)
    assert all(math.isfinite(e) for e in posterior.record.elbo)
    prediction = posterior.predict(x[:5])
    assert prediction.draws.shape == (7 * math.ceil(MIN_OBSERVATION_DRAWS / 7), 5)  # several y per weight draw
    assert prediction.f.shape == (7, 5, out)
    assert prediction.mean.shape == prediction.std.shape == (5,)
    if likelihood == "categorical":
        assert prediction.probs.shape == (5, 3)
        torch.testing.assert_close(prediction.probs.sum(-1), torch.ones(5))
    elif likelihood == "bernoulli":
        assert prediction.probs.shape == (5,)
    else:
        assert prediction.probs is None
