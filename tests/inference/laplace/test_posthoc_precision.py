r"""The prior precision chosen at a fixed MAP (bnn.inference.laplace.posthoc_precision), on the conjugate model,
where the GGN is the exact Hessian :math:`\Phi^\top\Phi/\sigma^2` and the evidence of the multiplier has a closed form
to compare with."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.inference import fit
from bnn.inference.curvature import gauss_newton
from bnn.inference.curvature.evidence_search import TOLERANCE
from bnn.inference.laplace.curvature import HessianType, Structure, likelihood_curvature
from bnn.inference.laplace.posthoc_precision import evidence_of_multiplier, posthoc_multiplier
from bnn.inference.map_search.map_estimate import find_map

from bnn.runtime.seeding import seeded
from tests.support.conjugate import NOISE, PRIOR_SCALE, conjugate_problem

pytestmark = pytest.mark.usefixtures("float64")


@pytest.fixture(scope="module")
def problem_and_map():
    with torch.random.fork_rng(), seeded(0):
        torch.set_default_dtype(torch.float64)
        try:
            problem = conjugate_problem()
            estimate = find_map(problem.model, problem.x, problem.y, steps=1000, lr=0.01, tolerance=0.1, progress=False)
        finally:
            torch.set_default_dtype(torch.float32)
    return problem, estimate


def closed_form_evidence(problem, theta: torch.Tensor, multiplier: float, structure: Structure = Structure.FULL) -> float:
    r""":math:`\log p(y \mid \theta) + \log\mathcal{N}(\theta; 0, s^2/\alpha) + \frac{D}{2}\log 2\pi
    - \frac12\log\det(H + \alpha/s^2)` with :math:`H = \Phi^\top\Phi/\sigma^2`, its blocks of the weight and the
    bias (``kron``: a Kronecker factorisation per parameter, exact within each for one dense layer of one output) or
    its diagonal (``diag``)."""
    phi = torch.cat([problem.x, torch.ones(problem.x.shape[0], 1)], dim=1)
    curvature = phi.T @ phi / NOISE**2
    if structure is Structure.KRON:
        curvature[:-1, -1] = curvature[-1, :-1] = 0.0
    if structure is Structure.DIAG:
        curvature = torch.diag(curvature.diagonal())
    precision = curvature + multiplier / PRIOR_SCALE**2 * torch.eye(theta.numel())
    log_likelihood = torch.distributions.Normal(phi @ theta, NOISE).log_prob(problem.y).sum()
    log_prior = torch.distributions.Normal(0.0, PRIOR_SCALE / math.sqrt(multiplier)).log_prob(theta).sum()
    return float(log_likelihood + log_prior + theta.numel() / 2 * math.log(2 * math.pi)
                 - torch.linalg.slogdet(precision)[1] / 2)


def curvature_at(problem, estimate, structure: Structure) -> torch.Tensor | None:
    """The likelihood's GGN at the MAP in ``structure`` (``None`` for kron, which the evidence forms itself)."""
    if structure is Structure.KRON:
        return None
    return likelihood_curvature(problem.model, problem.x, problem.y, estimate.theta, estimate.latents,
                                hessian_type=HessianType.GGN, structure=structure, progress=False)


@pytest.mark.parametrize("structure", [Structure.FULL, Structure.KRON, Structure.DIAG])
def test_the_evidence_of_a_multiplier_is_the_closed_form(problem_and_map, structure):
    """One dense layer of one output: the Kronecker factors of the weight and of the bias are exact, so kron gives the
    closed form of the curvature's two blocks, full the dense one, diag its diagonal. At multipliers over eight orders
    of magnitude, to round-off."""
    problem, estimate = problem_and_map
    evidence = evidence_of_multiplier(problem.model, problem.x, estimate, 0, structure,
                                      curvature_at(problem, estimate, structure))
    for multiplier in [1e-4, 0.1, 1.0, 30.0, 1e4]:
        expected = closed_form_evidence(problem, estimate.theta, multiplier, structure)
        assert evidence(multiplier) == pytest.approx(expected, rel=1e-10, abs=1e-9)


def test_the_chosen_multiplier_is_the_maximum_of_the_closed_form(problem_and_map):
    """The search's multiplier against the best of a grid of 4,001 points over log alpha in [-10, 10] (step 0.005),
    within the search's tolerance on the log scale."""
    problem, estimate = problem_and_map
    choice = posthoc_multiplier(problem.model, problem.x, estimate, 0, Structure.FULL,
                                curvature_at(problem, estimate, Structure.FULL))
    grid = torch.linspace(-10, 10, 4001)
    best = grid[torch.tensor([closed_form_evidence(problem, estimate.theta, math.exp(u)) for u in grid]).argmax()]
    assert choice.bracketed
    assert abs(math.log(choice.multiplier) - float(best)) <= TOLERANCE


def test_a_laplace_fit_on_a_minibatch_map_tunes_the_multiplier_at_that_map():
    """Through fit: the MAP on minibatches (no refits), the multiplier the closed-form evidence at that MAP (the
    guide's mean) peaks at, within the search's tolerance on the log scale, and the evidence there."""
    problem = conjugate_problem()
    posterior = fit(problem.model, (problem.x, problem.y), "laplace", map_batch_size=8, map_epochs=200,
                    map_batch_lr=0.05, seed=0, progress=False, num_samples=10)
    record, theta = posterior.record, posterior.extras["guide"].mean
    assert record.map_polish == "none: minibatch Adam, 200 epochs of 8 rows"
    grid = torch.linspace(-10, 10, 4001)
    evidences = torch.tensor([closed_form_evidence(problem, theta, math.exp(u)) for u in grid])
    assert abs(math.log(record.prior_precision_multiplier) - float(grid[evidences.argmax()])) <= TOLERANCE
    assert record.log_marginal_likelihood == pytest.approx(
        closed_form_evidence(problem, theta, record.prior_precision_multiplier), rel=1e-10)


def test_a_laplace_fit_whose_polish_is_lbfgs_tunes_the_multiplier_at_its_map(monkeypatch):
    """Through fit, where a Levenberg-Marquardt step is not affordable (here made so: no network qualifies), the MAP
    is fitted once (L-BFGS polish), not refitted per candidate; the multiplier is where the closed-form evidence at
    that MAP peaks, within the search's tolerance on the log scale. Where it is affordable, the search refits."""
    problem = conjugate_problem()
    refitted = fit(problem.model, (problem.x, problem.y), "laplace", seed=0, progress=False, num_samples=10).record
    assert refitted.evidence_refits is True and refitted.map_polish == "levenberg-marquardt"
    monkeypatch.setattr(gauss_newton, "GAUSS_NEWTON_MAX_WEIGHTS", 0)
    posterior = fit(problem.model, (problem.x, problem.y), "laplace", structure="full", seed=0, progress=False,
                    num_samples=10)
    record, theta = posterior.record, posterior.extras["guide"].mean
    assert record.evidence_refits is False and record.map_polish.startswith("lbfgs") and record.map_converged
    grid = torch.linspace(-10, 10, 4001)
    evidences = torch.tensor([closed_form_evidence(problem, theta, math.exp(u)) for u in grid])
    assert abs(math.log(record.prior_precision_multiplier) - float(grid[evidences.argmax()])) <= TOLERANCE
    assert record.log_marginal_likelihood == pytest.approx(
        closed_form_evidence(problem, theta, record.prior_precision_multiplier), rel=1e-10)
