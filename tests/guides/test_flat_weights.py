"""The flat weight vector: sites cut from it and joined back, a 0-dim site (a scalar weight) among them."""

from __future__ import annotations

import torch
from bnn.guides.flat_weights import join_sites, num_weights, split_flat
from bnn.models.sites import WeightSite

SITES = (WeightSite("weight", 0, torch.Size([2, 3]), 3), WeightSite("scale", 0, torch.Size([]), 1),
         WeightSite("bias", 0, torch.Size([2]), 3))


def test_split_and_join_are_inverse_with_a_scalar_site_and_sample_dimensions():
    assert num_weights(SITES) == 9
    for sample in ((), (4,), (2, 5)):
        flat = torch.randn(*sample, 9)
        values = split_flat(SITES, flat)
        assert [tuple(values[site.name].shape) for site in SITES] == [(*sample, 2, 3), sample, (*sample, 2)]
        assert torch.equal(values["scale"], flat[..., 6])
        assert torch.equal(join_sites(SITES, values), flat)
