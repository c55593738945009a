"""NUTS in the Laplace approximation's whitened coordinates: the map, the rule that picks it, and exact draws."""

from __future__ import annotations

import numpy as np
import pytest
from bnn.inference import fit
from bnn.inference.nuts.whitening import (
    MAX_LATENTS,
    ROWS_PER_LATENT,
    LaplaceWhitening,
    Whitening,
    negative_hessian,
    whitens,
)
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior

from tests.inference.test_exactness import CHECKS, check_nuts
from tests.support.conjugate import NOISE, NUM_FEATURES, PRIOR_SCALE

PRECISION = np.array([[400.0, 30.0, 0.0], [30.0, 9.0, 1.0], [0.0, 1.0, 1.0]])
CENTRE = np.array([0.5, -1.0, 2.0])


def gaussian(z: np.ndarray) -> tuple[float, np.ndarray]:
    """log N(z; CENTRE, PRECISION^-1) up to a constant, and its gradient."""
    gradient = -PRECISION @ (z - CENTRE)
    return 0.5 * float((z - CENTRE) @ gradient), gradient


def test_the_hessian_of_a_gaussian_is_its_precision():
    np.testing.assert_allclose(negative_hessian(gaussian, CENTRE + 0.3), PRECISION, rtol=1e-7, atol=1e-7)


def test_the_whitened_gaussian_is_the_standard_normal():
    whitening = LaplaceWhitening.at(gaussian, CENTRE)
    factor = whitening.factor
    np.testing.assert_allclose(factor @ factor.T, np.linalg.inv(PRECISION), rtol=1e-6, atol=1e-9)
    assert whitening.gradients == 2 * len(CENTRE)
    u = np.array([0.2, -1.5, 0.7])
    np.testing.assert_allclose(whitening.point(np.zeros(3)), CENTRE)
    value, gradient = whitening.log_density(gaussian)(u)
    np.testing.assert_allclose(value, -0.5 * u @ u, rtol=1e-6)  # u ~ N(0, I) exactly
    np.testing.assert_allclose(gradient, -u, rtol=1e-6, atol=1e-9)
    draws = np.stack([u, 2 * u])
    np.testing.assert_allclose(whitening.point(draws), [whitening.point(u), whitening.point(2 * u)])


def test_a_direction_of_negative_curvature_enters_by_its_magnitude():
    def saddle(z):
        return 0.5 * (z[1] ** 2 - 4 * z[0] ** 2), np.array([-4 * z[0], z[1]])

    factor = LaplaceWhitening.at(saddle, np.zeros(2)).factor
    np.testing.assert_allclose(np.abs(factor @ factor.T), np.diag([0.25, 1.0]), atol=1e-9)


@pytest.mark.parametrize("whitening, rows, latents, from_map, flat, expected", [
    (Whitening.AUTO, ROWS_PER_LATENT * 330, 330, True, True, True),
    (Whitening.AUTO, ROWS_PER_LATENT * 330 - 1, 330, True, True, False),  # too few rows per latent (toy1d: 100 for 152)
    (Whitening.AUTO, 10**7, MAX_LATENTS + 1, True, True, False),  # H too large
    (Whitening.AUTO, 10**6, 330, False, True, False),  # chains from the prior: no mode to centre on
    (Whitening.AUTO, 10**6, 330, True, False, False),  # Pyro's trace potential
    (Whitening.LAPLACE, 10, 330, True, True, True),
    (Whitening.NONE, 10**6, 330, True, True, False),
])
def test_auto_whitens_a_posterior_its_data_dominate(whitening, rows, latents, from_map, flat, expected):
    assert whitens(whitening, rows, latents, from_map, flat) is expected


@pytest.mark.parametrize("options, message", [
    (dict(whiten="laplace", engine="pyro"), "nutpie engine's"),
    (dict(whiten="laplace", init="prior"), "init='map'"),
    (dict(whiten="cholesky"), "whiten"),
])
def test_whitening_options_are_checked_before_any_work(conjugate, options, message):
    with pytest.raises(ValueError, match=message):
        fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", progress=False, **options)


@pytest.mark.long
@pytest.mark.parametrize("whiten", ["laplace", "none"])
def test_draws_match_the_exact_posterior_whitened_or_not(conjugate, whiten):
    """The conjugate posterior (40 rows, 3 latents: ``auto`` whitens it) from chains in either coordinates."""
    posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", seed=1, progress=False, whiten=whiten,
                    **CHECKS["nuts"][0])
    assert posterior.record.whitened is (whiten == "laplace")
    check_nuts(conjugate, posterior)


@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # 10 draws
def test_auto_leaves_a_network_with_fewer_rows_per_weight_as_it_was(conjugate):
    """40 rows for 3 latents are whitened, for the 17 of a hidden layer of 4 not (toy1d's case: 100 rows, 152)."""
    settings = dict(num_warmup=20, num_samples=10, num_chains=1, progress=False, seed=0)
    hidden = BayesianMLP(NUM_FEATURES, 1, hidden=(4,), prior=GaussianPrior(PRIOR_SCALE), likelihood=GaussianLikelihood(NOISE))
    assert not fit(hidden, (conjugate.x, conjugate.y), "nuts", **settings).record.whitened
    assert fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", **settings).record.whitened
