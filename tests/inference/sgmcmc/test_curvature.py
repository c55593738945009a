"""The stiffest curvature against the eigenvalues of the exact Hessian: the conjugate model's posterior precision,
and a small tanh network's Hessian formed by autograd."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference.sgmcmc import curvature
from bnn.inference.sgmcmc.curvature import stiffest_curvature
from bnn.inference.sgmcmc.potential import MinibatchLogJoint
from bnn.models import BayesianMLP

from tests.support.conjugate import NOISE, PRIOR_SCALE

pytestmark = pytest.mark.usefixtures("float64")


def test_on_the_conjugate_model_it_is_the_largest_eigenvalue_of_the_posterior_precision(conjugate):
    # minibatches of 8 of the 40 rows: the curvature is still the full data's (the log joint on all the data is not
    # scaled by N / |B|)
    log_joint = MinibatchLogJoint(conjugate.model, conjugate.x, conjugate.y, batch_size=8)
    exact = torch.linalg.eigvalsh(torch.linalg.inv(conjugate.cov)).max()
    torch.manual_seed(0)
    z = torch.randn(3, log_joint.dim)  # the Hessian is the same everywhere: each chain finds it
    torch.testing.assert_close(stiffest_curvature(log_joint, z, iterations=500), exact.expand(3), rtol=1e-6, atol=0)
    assert ((stiffest_curvature(log_joint, z) - exact).abs() < 0.02 * exact).all()  # the default iterations


def test_on_a_tanh_network_each_chain_gets_the_largest_magnitude_eigenvalue_of_its_own_hessian():
    data = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    with pyro.validation_enabled(False):
        log_joint = MinibatchLogJoint(model, data.x_train.double(), data.y_train.double(), batch_size=None)
        torch.manual_seed(1)
        z = log_joint.start(2)
        exact = torch.stack([torch.linalg.eigvalsh(-torch.autograd.functional.hessian(
            lambda point: log_joint.log_joint(point[None], None)[0], chain)).abs().max() for chain in z])
        assert not torch.allclose(exact[0], exact[1], rtol=0.1)  # two different points: the chains do not share one
        torch.testing.assert_close(stiffest_curvature(log_joint, z, iterations=500), exact, rtol=1e-6, atol=0)
        # the default iterations: the Rayleigh quotient from below, close enough to set a step
        default = stiffest_curvature(log_joint, z)
        assert ((default <= exact * (1 + 1e-9)) & (default >= 0.95 * exact)).all(), (default, exact)


def test_on_more_rows_than_it_takes_it_is_the_largest_eigenvalue_of_a_random_subsets_scaled_precision(conjugate,
                                                                                                     monkeypatch):
    monkeypatch.setattr(curvature, "CURVATURE_ROWS", 16)  # of the 40 rows
    log_joint = MinibatchLogJoint(conjugate.model, conjugate.x, conjugate.y, batch_size=8)
    z = torch.zeros(2, log_joint.dim)
    torch.manual_seed(3)
    estimate = stiffest_curvature(log_joint, z, iterations=500)
    torch.manual_seed(3)
    rows = curvature.curvature_batches(conjugate.x.shape[0], 2)
    assert rows.shape == (2, 16) and torch.equal(rows[0], rows[1]) and rows[0].unique().numel() == 16
    phi = torch.cat([conjugate.x, torch.ones(40, 1)], dim=1)[rows[0]]
    precision = torch.eye(3) / PRIOR_SCALE**2 + (40 / 16) * phi.T @ phi / NOISE**2  # the likelihood scaled by N / |S|
    exact = torch.linalg.eigvalsh(precision).max()
    torch.testing.assert_close(estimate, exact.expand(2), rtol=1e-6, atol=0)
    assert not torch.allclose(exact, torch.linalg.eigvalsh(torch.linalg.inv(conjugate.cov)).max(), rtol=1e-3)
    assert curvature.curvature_batches(16, 2) is None  # up to CURVATURE_ROWS rows: all of them
