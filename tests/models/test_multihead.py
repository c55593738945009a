from __future__ import annotations

import json

import pytest
import torch
from bnn.inference import fit
from bnn.models import BayesianMLP, MultiHeadMLP
from bnn.models.multihead import task_inputs


def net() -> MultiHeadMLP:
    return MultiHeadMLP(3, 2, num_heads=3, hidden=(4,), activation="tanh", likelihood="categorical")


def test_each_row_reads_its_own_head_on_the_shared_layers():
    """Row i of task t gives the plain MLP whose last layer is head t."""
    model = net()
    generator = torch.Generator().manual_seed(0)
    weights = {site.name: torch.randn(2, *site.shape, generator=generator) for site in model.sites}
    features, task = torch.randn(6, 3, generator=generator), torch.tensor([0, 2, 1, 1, 0, 2])
    f = model.forward(torch.cat([features, task[:, None].float()], dim=1), weights)
    assert f.shape == (2, 6, 2)
    plain = BayesianMLP(3, 2, hidden=(4,), activation="tanh", likelihood="categorical")
    for head in range(3):
        single = {"layers.0.weight": weights["layers.0.weight"], "layers.0.bias": weights["layers.0.bias"],
                  "layers.1.weight": weights[f"heads.{head}.weight"], "layers.1.bias": weights[f"heads.{head}.bias"]}
        rows = task == head
        torch.testing.assert_close(f[:, rows], plain.forward(features[rows], single))
    torch.testing.assert_close(model.forward(task_inputs(features, 1), weights)[:, 2], f[:, 2])


@pytest.mark.parametrize("task", [1.5, -1.0, 3.0])
def test_a_task_column_that_names_no_head_is_refused(task):
    model = net()
    x = torch.cat([torch.zeros(2, 3), torch.full((2, 1), task)], dim=1)
    with pytest.raises(ValueError, match="task index, an integer in 0..2"):
        model.forward(x, {site.name: torch.zeros(site.shape) for site in model.sites})


def test_sites_config_and_refusals():
    model = net()
    assert [site.name for site in model.sites][2:4] == ["heads.0.weight", "heads.0.bias"]
    assert model.in_features == 4 and model.num_features == 3
    rebuilt = BayesianMLP.from_config(json.loads(json.dumps(model.config())))
    assert isinstance(rebuilt, MultiHeadMLP) and rebuilt.config() == model.config()
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        MultiHeadMLP(3, 2, num_heads=0)
    x, y = task_inputs(torch.randn(8, 3), 1), torch.randint(0, 2, (8,))
    with pytest.raises(ValueError, match="method 'mc-dropout' needs a network that says where .* which MultiHeadMLP is not"):
        fit(model, (x, y), method="mc-dropout", steps=2, progress=False)


@pytest.mark.usefixtures("float64")  # the drawn outputs sum in another order than the forward pass: 1e-9 needs float64
def test_the_mean_field_guide_reparameterises_its_heads_locally():
    """Every site is a layer's weight or bias, so the guide draws each layer's outputs; at standard deviations of
    1e-13 the drawn outputs are the forward pass at the means, each row through its own head."""
    from bnn.guides import MeanFieldGuide
    from bnn.models.layers import local_reparameterisation

    model = net()
    guide = MeanFieldGuide(model, init_rho=-30.0)
    assert guide.local_reparameterisation
    x = torch.cat([task_inputs(torch.randn(4, 3), task) for task in range(3)])
    gaussians = guide.layer_gaussians()
    means = {f"{name}.{kind}": getattr(gaussian, f"{kind}_loc") for name, gaussian in gaussians.items()
             for kind in ("weight", "bias")}
    draws = {name: value.expand(5, *value.shape) for name, value in means.items()}
    with local_reparameterisation(gaussians) as called:
        drawn = model.forward(x, draws)
    assert sorted(called) == sorted(gaussians)  # every layer, once
    assert drawn.shape == (5, 12, 2)
    torch.testing.assert_close(drawn, model.forward(x, means).expand(5, 12, 2), rtol=1e-9, atol=1e-9)
