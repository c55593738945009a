"""SWAG's running moments against numpy on the same iterates, and its draws against the covariance they define."""

from __future__ import annotations

import numpy as np
import torch
from bnn.inference.swag import SWAGMoments


def iterates(seed: int = 0, count: int = 12, chains: int = 2, dim: int = 5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(count, chains, dim, generator=generator, dtype=torch.float64) * torch.arange(1.0, dim + 1)


def test_the_moments_are_the_iterates_mean_second_moment_and_last_deviations():
    thetas = iterates()
    moments = SWAGMoments(rank=4)
    for theta in thetas:
        moments.collect(theta)
    values = thetas.numpy()
    np.testing.assert_allclose(moments.mean.numpy(), values.mean(0), rtol=1e-12)
    np.testing.assert_allclose(moments.diagonal().numpy(), values.var(0), rtol=1e-10)
    running = np.cumsum(values, axis=0) / np.arange(1, 13)[:, None, None]  # the mean after each iterate
    expected = np.stack([values[i] - running[i] for i in range(8, 12)], axis=-1)  # the last 4, each from its own mean
    np.testing.assert_allclose(moments.low_rank().numpy(), expected, rtol=1e-12)
    assert moments.count == 12
    covariance = np.diag(values[:, 0].var(0)) / 2 + expected[0] @ expected[0].T / 6
    np.testing.assert_allclose(moments.covariance()[0].numpy(), covariance, rtol=1e-10)


def test_the_draws_have_the_swag_mean_and_covariance():
    """Whitened by the exact covariance :math:`\\Sigma = LL^T`, each draw's entries and their products have means 0 and
    :math:`\\delta_{jk}`; with n independent draws each mean lies within 4 standard errors (sd / sqrt(n))."""
    moments = SWAGMoments(rank=3)
    for theta in iterates(seed=1, count=7, chains=1, dim=4):
        moments.collect(theta)
    torch.manual_seed(2)
    draws = moments.sample(40_000)[0].numpy()
    factor = np.linalg.cholesky(moments.covariance()[0].numpy())
    whitened = np.linalg.solve(factor, (draws - moments.mean[0].numpy()).T).T
    for j in range(4):
        assert abs(whitened[:, j].mean()) < 4 * whitened[:, j].std() / 200
        for k in range(j, 4):
            products = whitened[:, j] * whitened[:, k]
            assert abs(products.mean() - (j == k)) < 4 * products.std() / 200, (j, k, products.mean())


def test_finite_iterates_whose_squares_overflow_make_moments_that_are_not_finite():
    moments = SWAGMoments(rank=2)
    moments.collect(torch.ones(2, 3, dtype=torch.float64))
    assert moments.finite()
    moments.collect(torch.full((2, 3), 1e200, dtype=torch.float64))  # finite; its square is not
    assert not moments.finite()
