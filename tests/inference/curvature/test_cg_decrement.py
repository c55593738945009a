"""The matrix-free Gauss-Newton precision and the Newton decrement by conjugate gradients
(bnn.inference.curvature.cg_decrement), against the dense precision."""

from __future__ import annotations

import warnings

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.guides.flat_weights import join_sites
from bnn.inference.curvature import gauss_newton
from bnn.inference.curvature.cg_decrement import PrecisionOperator, cg_decrement
from bnn.inference.curvature.gauss_newton import log_joint_precision, newton_decrement
from bnn.inference.curvature.kron_curvature import kron_supported
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood
from bnn.inference.map_search.map_estimate import find_map, working_data
from bnn.models import BayesianMLP


def off_mode(prior="gaussian", seed: int = 0):
    """A 3-8-4 tanh classifier on 60 random rows, at a draw of its prior (far from the mode), in float64: the model,
    data, weights, prior and the log joint's gradient there."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(60, 3, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 4, (60,), generator=generator)
    model = BayesianMLP(3, 4, hidden=(8,), likelihood="categorical", prior=prior)
    scaled = ScaledPrior(model, 1.0)
    torch.manual_seed(seed)
    theta = join_sites(model.sites, {name: d.sample() for name, d in scaled.distributions.items()}).to(torch.float64)
    point = theta.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(log_likelihood(model, x, y, point, {}) + scaled.log_prob(point), point)
    return model, x, y, theta, scaled, gradient


def test_the_matrix_free_product_is_the_dense_precision_times_the_vector():
    model, x, _, theta, prior, _ = off_mode()
    dense = log_joint_precision(model, x, theta, {}, prior.curvature(theta, 0), start=0, diagonal=False)
    operator = PrecisionOperator(model, x, theta, {}, prior.curvature(theta, 0), start=0)
    vectors = torch.randn(3, theta.numel(), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for vector in vectors:  # the dense one adds a jitter of 1e-10 x its mean diagonal: far below this tolerance
        torch.testing.assert_close(operator.times(vector), dense @ vector, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("prior", ["gaussian", "scale-mixture"])
def test_the_decrement_by_conjugate_gradients_is_the_dense_one(prior):
    """Kronecker-preconditioned under the Gaussian prior, diagonally under the scale-mixture prior (no Kronecker
    factors). At the tolerance the estimate reads the unexplained term low, here by less than 1% of delta; ten times
    above it, where the verdict is already certain, the iterations stop early (delta read to 10% at worst)."""
    model, x, _, theta, scaled, gradient = off_mode(prior)
    assert kron_supported(model, x) == (prior == "gaussian")
    dense = newton_decrement(gradient, log_joint_precision(model, x, theta, {}, scaled.curvature(theta, 0), start=0,
                                                           diagonal=False))
    operator = PrecisionOperator(model, x, theta, {}, scaled.curvature(theta, 0), start=0)
    assert cg_decrement(operator, gradient, tolerance=dense) == pytest.approx(dense, rel=0.01)
    assert cg_decrement(operator, gradient, tolerance=dense / 10) == pytest.approx(dense, rel=0.1)


@pytest.mark.parametrize("prior", ["gaussian", "scale-mixture"])
def test_a_verdict_only_decrement_stops_once_it_is_certain_to_exceed_the_tolerance(prior, monkeypatch):
    """Asked only for the verdict, at a tolerance a tenth of delta the iterations stop as soon as the lower bound
    delta_k passes it: fewer products than the full estimate, a value between the tolerance and delta (plus the
    preconditioner's estimate of the unexplained term, small here); at a tolerance above delta the verdict is the
    full estimate's, to the bit (the same iterations run)."""
    model, x, _, theta, scaled, gradient = off_mode(prior)
    dense = newton_decrement(gradient, log_joint_precision(model, x, theta, {}, scaled.curvature(theta, 0), start=0,
                                                           diagonal=False))
    operator = PrecisionOperator(model, x, theta, {}, scaled.curvature(theta, 0), start=0)
    products = []
    times = operator.times
    monkeypatch.setattr(operator, "times", lambda vector: products.append(1) or times(vector))

    def counted(tolerance: float, verdict_only: bool) -> tuple[float, int]:
        products.clear()
        return cg_decrement(operator, gradient, tolerance, verdict_only=verdict_only), len(products)

    (full, full_products), (verdict, verdict_products) = counted(dense / 10, False), counted(dense / 10, True)
    assert full == pytest.approx(dense, rel=0.1) and dense / 10 < verdict <= 1.05 * dense
    assert verdict_products < full_products
    assert counted(2 * dense, True) == counted(2 * dense, False)


def test_a_map_too_large_for_the_dense_precision_reports_the_decrement_of_the_dense_one(monkeypatch):
    """With the dense limit lowered below the network's 25 weights the polish is L-BFGS and the decrement comes by
    conjugate gradients; at the weights it ended at, it is the dense precision's (to 10%: there it is far above the
    tolerance, and the iterations stop once the verdict is certain)."""
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", 10)
    data = load_toy1d(n_train=40, n_test=10)
    x, y = working_data(data.x_train, data.y_train)
    model = BayesianMLP(1, 1, hidden=(8,), likelihood={"name": "gaussian", "scale": 0.3})
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a short budget: not converged, and said so
        estimate = find_map(model, x, y, steps=50, lr=0.01, tolerance=0.1, progress=False, max_iter=5)
    assert estimate.polish == "lbfgs, kron-whitened" and not estimate.converged
    scaled, point = ScaledPrior(model, 1.0), estimate.theta.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(log_likelihood(model, x, y, point, {}) + scaled.log_prob(point), point)
    precision = log_joint_precision(model, x, estimate.theta, {}, scaled.curvature(estimate.theta, 0), start=0,
                                    diagonal=False)
    assert estimate.newton_decrement == pytest.approx(newton_decrement(gradient, precision), rel=0.1)
