"""The MAP polish's L-BFGS above the dense limit (bnn.inference.map_search.polish), plain and whitened, judged by
the dense precision."""

from __future__ import annotations

import pytest
import torch
from bnn.datasets import load_dataset
from bnn.inference.curvature import gauss_newton
from bnn.inference.curvature.gauss_newton import log_joint_precision, newton_decrement
from bnn.inference.map_search import polish
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood
from bnn.inference.map_search.map_estimate import find_map, working_data
from bnn.inference.map_search.polish import MapProblem
from bnn.models import BayesianMLP, from_module


def digits_subset(activation: str = "tanh"):
    """200 training rows of digits (64 pixels, 10 classes) in float64, and a 64-5-10 classifier (385 weights)."""
    data = load_dataset("digits")
    x, y = working_data(data.x_train[:200], data.y_train[:200])
    return BayesianMLP(64, 10, hidden=(5,), activation=activation, likelihood="categorical"), x, y


@pytest.mark.parametrize("whitened", [True, False])
def test_lbfgs_above_the_dense_limit_stops_at_a_mode_by_the_dense_precision(monkeypatch, whitened):
    """With the dense limit lowered below the network's weights the polish is L-BFGS (in Kronecker-whitened
    coordinates, or plain where whitening is turned off); where it says it converged, the dense precision's decrement
    agrees. (The modes differ, so they are not compared with Levenberg-Marquardt's: the same find_map at the real
    dense limit ended 1.08 posterior sd from the whitened run's end, the log joints 4e-5 nats apart, and the plain
    run at another mode 0.08 nats lower, in a measurement at cfcb3c6.)"""
    model, x, y = digits_subset()
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", 100)
    monkeypatch.setattr(MapProblem, "whitens", lambda self, start: whitened and start == 0)
    torch.manual_seed(0)
    estimate = find_map(model, x, y, steps=300, lr=0.01, tolerance=0.01, progress=False, max_iter=20000)
    assert estimate.polish == ("lbfgs, kron-whitened" if whitened else "lbfgs") and estimate.converged
    scaled, point = ScaledPrior(model, 1.0), estimate.theta.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(log_likelihood(model, x, y, point, {}) + scaled.log_prob(point), point)
    precision = log_joint_precision(model, x, estimate.theta, {}, scaled.curvature(estimate.theta, 0), start=0,
                                    diagonal=False)
    assert newton_decrement(gradient, precision) <= 0.01


@pytest.mark.parametrize("dense_limit, activation, polish_name, lowered", [
    (100, "tanh", "lbfgs, kron-whitened", "LBFGS_MAX_ITER"),
    (100, "relu", "lbfgs, kron-whitened", "KINKED_LBFGS_MAX_ITER"),
    (4096, "tanh", "levenberg-marquardt", "LEVENBERG_MARQUARDT_MAX_ITER"),
])
def test_without_a_budget_each_polish_takes_its_own_default(monkeypatch, dense_limit, activation, polish_name, lowered):
    """find_map without max_iter stops at the default of the polish it runs, L-BFGS's smaller one for a network with
    kinks (each lowered to 3 here, the tolerance out of reach)."""
    model, x, y = digits_subset(activation)
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", dense_limit)
    for default in ("LBFGS_MAX_ITER", "KINKED_LBFGS_MAX_ITER", "LEVENBERG_MARQUARDT_MAX_ITER"):
        monkeypatch.setattr(polish, default, 3 if default == lowered else 10_000)
    torch.manual_seed(0)
    with pytest.warns(RuntimeWarning, match="stopped after 3 iterations"):
        estimate = find_map(model, x, y, steps=10, lr=0.01, tolerance=1e-12, progress=False)
    assert estimate.polish == polish_name and estimate.lbfgs_iterations == 3


def test_the_whole_network_pass_of_a_judged_polish_forms_no_precision_over_every_weight(monkeypatch):
    """With judged_from at the last layer (a last-layer Laplace's MAP) and the dense limit between that layer's 60
    weights and the network's 385, the polish of all weights is L-BFGS and only the last layer's pass is
    Levenberg-Marquardt: no Gauss-Newton precision over all weights is formed (each costs the dense GGN of the whole
    network, where a step over the last layer alone is what is affordable)."""
    model, x, y = digits_subset()
    start = 385 - 60
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", 100)
    formed, precision = [], MapProblem.precision
    monkeypatch.setattr(MapProblem, "precision", lambda self, w, latents, prior, begin: formed.append(begin) or
                        precision(self, w, latents, prior, begin))
    torch.manual_seed(0)
    estimate = find_map(model, x, y, steps=300, lr=0.01, tolerance=0.1, progress=False, judged_from=start)
    assert formed and set(formed) == {start}
    assert estimate.polish.startswith("levenberg-marquardt") and estimate.converged


class LogOutput(torch.nn.Module):
    """The log of a linear layer's output, NaN wherever it is negative."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).log()


def test_an_objective_not_finite_before_the_first_step_names_the_network_not_the_step_size():
    model = from_module(LogOutput(), likelihood={"name": "gaussian", "scale": 0.1})
    x = torch.linspace(-1, 1, 10, dtype=torch.float64).unsqueeze(-1)
    with pytest.raises(FloatingPointError, match=r"the MAP objective is nan at its start \(a draw from the prior\), "
                                                 r"before any step, so map_lr is not the cause: the network's output on "
                                                 r"the training inputs holds NaN there.*check the module's forward"):
        find_map(model, x, x.squeeze(-1), steps=10, lr=0.01, tolerance=0.01, progress=False)
