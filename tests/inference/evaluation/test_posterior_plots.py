from __future__ import annotations

import matplotlib.image
import pytest
import torch
from bnn.inference.evaluation.posterior_plots import plot_trace
from bnn.models import BayesianMLP

from tests.support.chains import chains_posterior


@pytest.mark.parametrize("jitter", [0, 2], ids=["constant", "a few ulps apart"])
def test_a_chain_that_stopped_moving_still_gets_its_trace_plot(jitter, tmp_path):
    """A NUTS chain whose every step was rejected keeps one point, its float32 values at most a few units in the
    last place apart; ArviZ's density estimate of such a chain raised in float32 ("Too many bins for data range"),
    which ended a whole report after its fits had run."""
    generator = torch.Generator().manual_seed(0)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})
    x = torch.linspace(-1, 1, 10).unsqueeze(-1)
    samples = {name: torch.randn(2, 40, *shape, generator=generator) for name, shape in model.latent_shapes.items()}
    for draws in samples.values():
        point = draws[1, :1].clone()
        ulps = torch.randint(-jitter, jitter + 1, draws[1].shape, generator=generator)
        draws[1] = point + point * torch.finfo(torch.float32).eps * ulps
    assert jitter == 0 or any(draws[1].unique().numel() > draws[1, 0].numel() for draws in samples.values())
    posterior = chains_posterior(model, samples, x, torch.sin(3 * x).squeeze(-1))
    path = plot_trace(posterior, tmp_path / "trace.png")
    assert path.exists() and matplotlib.image.imread(path).shape[-1] in (3, 4)
