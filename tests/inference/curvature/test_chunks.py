"""The curvature of every structure and the linearised predictive, summed over chunks of rows: the numbers of one pass
over all the rows, and no forward pass over more rows than a chunk, however many rows there are (so memory grows with
the chunk and the weights, not with the rows)."""

from __future__ import annotations

import pytest
import torch
from bnn.guides.flat_weights import num_weights
from bnn.guides.laplace import LaplaceGuide
from bnn.inference.curvature import kron_curvature, output_curvature
from bnn.inference.curvature.kron_curvature import kron_factors, kron_posterior
from bnn.inference.laplace.curvature import HessianType, Structure, likelihood_curvature
from bnn.inference.laplace.linearized import Linearization
from bnn.models import BayesianMLP, from_module
from torch import nn

pytestmark = pytest.mark.usefixtures("float64")
CURVATURES = ["full", "diag", "last-layer", "exact", "kron"]
"""The GGN of each structure, the exact Hessian (full) and the Kronecker factors."""


def network(kind: str):
    """A 2-4-3 tanh classifier, written with the layers or as a torch module."""
    likelihood = "categorical"
    if kind == "mlp":
        return BayesianMLP(2, 3, hidden=(4,), likelihood=likelihood)
    return from_module(nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 3)), likelihood=likelihood)


def problem(kind: str, rows: int):
    generator = torch.Generator().manual_seed(rows)
    model = network(kind)
    theta = torch.randn(num_weights(model.sites), generator=generator)
    return model, theta, torch.randn(rows, 2, generator=generator), torch.randint(0, 3, (rows,), generator=generator)


def curvature(model, x, y, theta, which: str) -> torch.Tensor:
    """The curvature ``which`` (:data:`CURVATURES`) as one flat tensor."""
    if which == "kron":
        return torch.cat([torch.cat([layer.inputs_factor.flatten(), layer.gradients_factor.flatten()])
                          for layer in kron_factors(model, x, theta, {})])
    hessian, structure = (HessianType.EXACT, "full") if which == "exact" else (HessianType.GGN, which)
    return likelihood_curvature(model, x, y, theta, {}, hessian_type=hessian, structure=Structure(structure)).flatten()


def rows_seen(model, monkeypatch) -> list[int]:
    """The rows of every forward pass of ``model`` from now on (one under the per-row Jacobian's ``vmap``)."""
    seen, forward = [], model.forward

    def counted(x, weights):
        seen.append(x.shape[0])
        return forward(x, weights)

    monkeypatch.setattr(model, "forward", counted)
    return seen


def one_row_chunks(monkeypatch) -> None:
    """A memory budget of one byte: every chunk is one row."""
    for module in (output_curvature, kron_curvature):
        monkeypatch.setattr(module, "JACOBIAN_BUDGET_BYTES", 1)


@pytest.mark.parametrize("kind", ["mlp", "module"])
@pytest.mark.parametrize("which", CURVATURES)
def test_each_curvature_over_one_row_chunks_is_the_one_pass_over_all_rows(kind, which, monkeypatch):
    """11 rows in one chunk (the default budget) and in 11 chunks of one row, equal to round-off; with one-row chunks
    no forward pass sees more than one row, at 11 rows or at 30."""
    model, theta, x, y = problem(kind, 11)
    whole = curvature(model, x, y, theta, which)
    one_row_chunks(monkeypatch)
    seen = rows_seen(model, monkeypatch)
    torch.testing.assert_close(curvature(model, x, y, theta, which), whole, rtol=1e-12, atol=1e-13)
    more_model, more_theta, more_x, more_y = problem(kind, 30)
    more_seen = rows_seen(more_model, monkeypatch)
    curvature(more_model, more_x, more_y, more_theta, which)
    assert max(seen) == max(more_seen) == 1 and len(more_seen) > len(seen)


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_the_linearised_predictive_runs_in_one_row_chunks_with_the_same_numbers(structure, monkeypatch):
    """The output moments, the linearised network at weight draws and the predictive's draws (same seed) at 11 test
    rows, in one chunk and in one-row chunks, under a dense and a Kronecker-factored covariance."""
    model, theta, x, y = problem("mlp", 11)
    if structure == "kron":
        scale = kron_posterior(model, x, theta, {}, torch.ones_like(theta))
    else:
        scale = torch.linalg.cholesky(torch.linalg.inv(curvature(model, x, y, theta, "full").view(theta.numel(), -1)
                                                       + torch.eye(theta.numel())))
    linearization = Linearization(LaplaceGuide(model.sites, theta, scale))
    draws = {site.name: torch.randn(5, *site.shape, generator=torch.Generator().manual_seed(1)) for site in model.sites}

    def predictive():
        torch.manual_seed(0)
        return (*linearization.output_moments(model, x), linearization.function_draws(model, x, draws),
                linearization.predict(model, x, 4).draws)

    whole = predictive()
    one_row_chunks(monkeypatch)
    seen = rows_seen(model, monkeypatch)
    for chunked, expected in zip(predictive(), whole):
        torch.testing.assert_close(chunked, expected, rtol=1e-12, atol=1e-13)
    assert max(seen) == 1
