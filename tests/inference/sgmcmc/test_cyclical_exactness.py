r"""cSGLD and cSGHMC against the exact law of their own chains on Bayesian linear regression (tests/support/conjugate.py).

A cyclical chain is not stationary: each cycle explores without noise (full-batch gradient ascent contracts every
chain onto the mode :math:`m`), then samples at steps that shrink to zero, so the variance regrows from nearly zero
and the last draws barely move. Its draws therefore do not follow the posterior :math:`\mathcal{N}(m, S)`, and an
exactness test must say by how much. On a Gaussian posterior with full batches each step is linear in the state with
Gaussian noise, so the law of the position at every step is Gaussian and computed exactly by propagating its mean and
covariance (:func:`chain_law`): with :math:`u = z - m`, :math:`g = -\Lambda u`,

* Langevin: :math:`u' = (I - \tfrac{\epsilon}{2}\Lambda)u + \sqrt{\epsilon}\,\xi`;
* Hamiltonian, state :math:`(u, v)`: :math:`v' = (1 - \alpha) r v - \epsilon\Lambda u + \sqrt{2\alpha\epsilon}\,\xi`,
  :math:`u' = u + v'`, with :math:`r = \sqrt{\epsilon_t / \epsilon_{t-1}}` (the kernel's rescaling);

with no :math:`\xi` in the exploring steps, from the start :math:`z_0 \sim \mathcal{N}(0, I)` (a prior draw,
``init="prior"``) and, for
the Hamiltonian one, :math:`v_0 \sim \mathcal{N}(0, \epsilon_0 I)`. The pooled draws follow the equal mixture of the
kept steps' laws, whose mean :math:`\bar\mu` and covariance :math:`\bar\Sigma` the test checks.

Tolerances: the chains are independent and identically distributed, so each chain's average of a statistic over its
draws is one independent replicate of its expectation under the mixture. With :math:`w = \bar L^{-1}(z - \bar\mu)`
(:math:`\bar\Sigma = \bar L\bar L^\top`) the expectations are exactly 0 for :math:`w_k` and :math:`\delta_{jk}` for
:math:`w_j w_k`; each of the 9 is checked within 4 standard errors (the chains' sd of the replicate over
:math:`\sqrt{C}`): a false alarm about 1 in 16,000 per check for a normal average (the seeds are fixed).

The test also states the bias against the posterior at these options (computed, not sampled): the mixture's whitened
covariance :math:`L^{-1}\bar\Sigma L^{-\top}` (:math:`S = LL^\top`) against :math:`I` and the mean against :math:`m`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from bnn.inference import fit
from bnn.inference.sgmcmc import ConvergenceWarning
from bnn.inference.sgmcmc.options import CSGLDOptions
from bnn.inference.sgmcmc.step_plans import BurnInPlan

CHAINS = 512
"""Many chains of few cycles: the chains run side by side (one gradient pass serves them all), so a chain costs far
less than a cycle; 512 chains of 4 cycles are 2,048 chain-cycles (64 of 30 were 1,920), in a fifth of the steps. Every
cycle but the first restarts from the exploration's contraction onto the mode, so the mixture's law is the same for 4
cycles as for 30 (:func:`chain_law` gives it for either). Thinning by 10 keeps as much (the kept draws of a cycle are
strongly correlated: their standard errors were the same at a thinning of 4) with fewer draws for the fit's
convergence diagnostics to rank."""
OPTIONS = {
    "langevin": dict(init="prior", step_size=2e-3, num_cycles=4, cycle_length=400, exploration=0.5, thin=10),
    "hamiltonian": dict(init="prior", step_size=2e-4, num_cycles=4, cycle_length=400, exploration=0.5, thin=10, friction=0.1,
                        dynamics="hamiltonian"),
}
BIAS = {"langevin": 0.02, "hamiltonian": 0.06}
"""The most the mixture's whitened covariance may differ from the identity, entry by entry, at these options: its
diagonal is 1.004, 1.012, 1.004 for the Langevin chains and 0.965, 0.969, 0.966 for the Hamiltonian ones (whose
momentum is still relaxing when the step shrinks), the off-diagonal entries smaller."""


def chain_law(conjugate, plan, first_step: float, dynamics: str, friction: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact mean and covariance of the pooled draws of chains that follow ``plan``
    (:mod:`bnn.inference.sgmcmc.step_plans`) from step size ``first_step`` with ``dynamics`` (module notes)."""
    precision = np.linalg.inv(conjugate.cov.numpy())
    d, mean = len(precision), conjugate.mean.numpy()
    identity = np.eye(d)
    hamiltonian = dynamics == "hamiltonian"
    if hamiltonian:  # state (u, v); u0 = z0 - m with z0 ~ N(0, I), v0 ~ N(0, eps0 I)
        state_mean = np.concatenate([-mean, np.zeros(d)])
        state_cov = np.block([[identity, 0 * identity], [0 * identity, first_step * identity]])
    else:
        state_mean, state_cov = -mean, identity.copy()
    kept_means, kept_second = [], []
    last = first_step
    for step in range(plan.total):
        epsilon = first_step * plan.step_factor(step)
        if plan.keeps(step):
            u_mean, u_cov = state_mean[:d], state_cov[:d, :d]
            kept_means.append(u_mean)
            kept_second.append(u_cov + np.outer(u_mean, u_mean))
        noisy = not plan.explores(step)
        if hamiltonian:
            carry = (1 - friction) * np.sqrt(epsilon / last)
            transition = np.block([[identity - epsilon * precision, carry * identity],
                                   [-epsilon * precision, carry * identity]])
            noise = 2 * friction * epsilon * np.block([[identity, identity], [identity, identity]]) * noisy
        else:
            transition = identity - epsilon / 2 * precision
            noise = epsilon * identity * noisy
        state_mean = transition @ state_mean
        state_cov = transition @ state_cov @ transition.T + noise
        last = epsilon
    u_bar = np.mean(kept_means, axis=0)
    return mean + u_bar, np.mean(kept_second, axis=0) - np.outer(u_bar, u_bar)


@pytest.mark.long
@pytest.mark.parametrize("dynamics", [pytest.param(dynamics, marks=pytest.mark.slow) if dynamics == "hamiltonian" else dynamics
                                      for dynamics in sorted(OPTIONS)])  # make test: langevin's, the same cycle code
def test_the_draws_follow_their_chains_exact_law_and_its_distance_from_the_posterior_is_bounded(conjugate, dynamics):
    options = OPTIONS[dynamics]
    with warnings.catch_warnings():  # each chain's cycles sample one mode: no convergence verdict is tested here
        warnings.simplefilter("ignore", ConvergenceWarning)
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "csgld", seed=3, num_chains=CHAINS, progress=False,
                        **options)
    law_mean, law_cov = chain_law(conjugate, CSGLDOptions(**options).plan(), options["step_size"], dynamics,
                                  options.get("friction", 0.0))
    draws = conjugate.flatten(posterior.samples).numpy()  # (chains, draws, 3)
    assert draws.shape[:2] == (CHAINS, CSGLDOptions(**options).plan().num_samples)
    whitened = np.linalg.solve(np.linalg.cholesky(law_cov), (draws - law_mean)[..., None])[..., 0]
    statistics = {f"w{k}": whitened[..., k] for k in range(3)}
    statistics |= {f"w{j}w{k}": whitened[..., j] * whitened[..., k] for j in range(3) for k in range(j, 3)}
    for name, values in statistics.items():
        replicates = values.mean(axis=1)  # one per chain, independent
        expected = float(name.count("w") == 2 and name[1] == name[3])
        standard_error = replicates.std(ddof=1) / np.sqrt(CHAINS)
        assert abs(replicates.mean() - expected) < 4 * standard_error, (name, replicates.mean(), standard_error)
    # the law's distance from the posterior, stated: whitened by S, entry by entry, and the mean in posterior sds
    factor = np.linalg.cholesky(conjugate.cov.numpy())
    against_posterior = np.linalg.solve(factor, np.linalg.solve(factor, law_cov).T)
    assert np.abs(against_posterior - np.eye(3)).max() < BIAS[dynamics], against_posterior
    assert np.abs(np.linalg.solve(factor, law_mean - conjugate.mean.numpy())).max() < 0.01


@pytest.mark.parametrize("dynamics", ["langevin", "hamiltonian"])
def test_the_law_propagation_reaches_the_samplers_stationary_covariance(conjugate, dynamics):
    """The check of :func:`chain_law` itself: at a constant step, after a long burn-in, it gives the stationary law of
    SGLD, :math:`S(I - \\epsilon\\Lambda/4)^{-1}`, and of SGHMC, variance
    :math:`\\lambda^{-1}(1 - \\eta\\lambda/(2(2 - \\alpha)))^{-1}` along each eigenvector of :math:`\\Lambda`
    (tests/inference/sgmcmc/test_exactness.py), both with the exact mean."""
    step, friction = 1e-3, 0.1
    plan = BurnInPlan(num_warmup=3000, num_samples=500, thin=1)
    mean, cov = chain_law(conjugate, plan, step, dynamics, friction)
    precision = np.linalg.inv(conjugate.cov.numpy())
    values, vectors = np.linalg.eigh(precision)
    if dynamics == "langevin":
        stationary = np.linalg.inv(precision @ (np.eye(3) - step * precision / 4))
    else:
        stationary = vectors @ np.diag(1 / (values * (1 - step * values / (2 * (2 - friction))))) @ vectors.T
    np.testing.assert_allclose(mean, conjugate.mean.numpy(), atol=1e-10)
    np.testing.assert_allclose(cov, stationary, rtol=1e-8)
