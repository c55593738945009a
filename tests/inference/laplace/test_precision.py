"""The posterior precision at given weights: exact on the conjugate model, indefinite with the exact Hessian of a BNN."""

from __future__ import annotations

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.laplace import posterior_precision
from bnn.models import BayesianMLP, GaussianPrior

from tests.support.conjugate import NOISE, PRIOR_SCALE


def test_on_the_conjugate_model_both_curvatures_are_the_exact_precision(conjugate):
    # y = Phi beta + noise: Lambda = Phi^T Phi / sigma^2 + I / s^2 at every beta
    values = {"layers.0.weight": torch.tensor([[0.3, -2.0]]), "layers.0.bias": torch.tensor([1.5])}
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], dim=1)
    exact = phi.T @ phi / NOISE**2 + torch.eye(3) / PRIOR_SCALE**2
    for hessian in ("ggn", "exact"):
        assert torch.allclose(posterior_precision(conjugate.model, conjugate.x, conjugate.y, values, hessian=hessian),
                              exact, atol=1e-10)
    diagonal = posterior_precision(conjugate.model, conjugate.x, conjugate.y, values, structure="diag")
    assert torch.allclose(diagonal, exact.diagonal(), atol=1e-10)
    last_layer = posterior_precision(conjugate.model, conjugate.x, conjugate.y, values, structure="last-layer")
    assert torch.allclose(last_layer, exact, atol=1e-10)  # no hidden layer: the last layer is everything


@pytest.mark.long
def test_the_ggn_precision_of_a_bnn_is_positive_definite_and_its_exact_hessian_differs():
    data = load_toy1d(n_train=40, n_test=5)
    model = BayesianMLP(1, 1, hidden=(10,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": None})
    estimate = fit(model, data, "map", map_steps=200, seed=0, progress=False)
    values = {name: value[0, 0] for name, value in estimate.samples.items()}
    ggn = posterior_precision(model, data.x_train, data.y_train, values, hessian="ggn")
    exact = posterior_precision(model, data.x_train, data.y_train, values, hessian="exact")
    assert ggn.shape == exact.shape == (31, 31)
    assert torch.linalg.eigvalsh(ggn).min() >= 1.0 - 1e-8  # PSD curvature + the prior's identity
    assert torch.allclose(ggn, ggn.T) and torch.allclose(exact, exact.T, atol=1e-8)
    assert not torch.allclose(ggn, exact, atol=1e-3)  # the second-order term of a hidden layer


def test_an_unknown_curvature_is_named():
    data = load_toy1d(n_train=10, n_test=5)
    model = BayesianMLP(1, 1, hidden=(2,))
    values = {site.name: torch.zeros(site.shape) for site in model.sites}
    with pytest.raises(ValueError, match="hessian.*'hessain'.*ggn"):
        posterior_precision(model, data.x_train, data.y_train, values, hessian="hessain")
