"""The guide SVI starts from: init_loc="map" fits the MAP on the full training data, whatever the batch size."""

from __future__ import annotations

import pytest
import torch
from bnn.inference import fit
from bnn.inference.map_search.map_estimate import map_weights
from bnn.models import BayesianMLP, GaussianPrior

from bnn.runtime.seeding import seeded


@pytest.mark.long
def test_minibatch_svi_with_init_loc_map_starts_at_the_full_data_map():
    """Under the fit's seed the MAP is the first thing drawn, so the same seed gives the same MAP; one step at a rate
    of 1e-9 moves mu by about 1e-9 from it."""
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 2, generator=generator), torch.randn(12, generator=generator)
    model = BayesianMLP(2, 1, hidden=(4,), prior=GaussianPrior(0.7), likelihood={"name": "gaussian", "scale": None})
    with seeded(5):
        expected = map_weights(model, x, y)
    posterior = fit(model, (x, y), guide="meanfield", guide_options={"init_loc": "map"}, steps=1, batch_size=4, lr=1e-9,
                    seed=5, progress=False, num_samples=3)
    assert posterior.record.batch_size == 4
    loc_scale = posterior.extras["guide"].site_loc_scale()
    for site in model.sites:
        torch.testing.assert_close(loc_scale[site.name][0], expected[site.name], rtol=0, atol=1e-6)
    torch.testing.assert_close(loc_scale["sigma"][0], expected["sigma"].log(), rtol=0, atol=1e-6)
