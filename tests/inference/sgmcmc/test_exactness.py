r"""SGLD, pSGLD and SGHMC against the closed-form posterior of Bayesian linear regression (tests/support/conjugate.py).

The posterior is :math:`\mathcal{N}(m, S)`, :math:`S = \Lambda^{-1}`, :math:`\lambda(\Lambda) = 123, 197, 233`.

Tolerances, from the Monte Carlo error of the chains (ArviZ's ESS over all chains, ``method="mean"``):

* means: :math:`|\bar\beta_k - m_k| < 4\,\mathrm{sd}_k/\sqrt{\mathrm{ESS}_k}`;
* covariance, whitened by the exact :math:`S = LL^\top`: with :math:`u = L^{-1}(\beta - m)` (exactly
  :math:`\mathcal{N}(0, I)` under the posterior) every entry :math:`\hat C_{jk} = \overline{u_j u_k}` lies within
  :math:`4\,\mathrm{sd}(u_j u_k)/\sqrt{\mathrm{ESS}(u_j u_k)}` of :math:`\delta_{jk}` (for independent draws that
  standard error is :math:`\sqrt{2/n}` on the diagonal and :math:`\sqrt{1/n}` off it). Four standard errors: a false
  alarm about 1 time in 16,000 per entry, 1 in 1,800 over the 9 checks of a run (the seeds are fixed, so a run
  passes or fails for good).

The samplers have no Metropolis step, so their stationary law is not the posterior; the steps are chosen so that
the bias is below half a standard error of every checked entry, and each test asserts that too, from the exact
stationary covariance of the linear-Gaussian chain (:func:`stationary_bias`):

* SGLD, full batch: :math:`S(I - \epsilon\Lambda/4)^{-1}` (the mean is exact); with minibatches the gradient
  noise of covariance :math:`Q` adds, to first order in :math:`\epsilon` and for independent batches,
  :math:`\tilde\Sigma_{jk} = (\delta_{jk} + \tfrac{\epsilon}{4}\tilde Q_{jk}) / (\tfrac{\lambda_j + \lambda_k}{2} -
  \tfrac{\epsilon}{4}\lambda_j\lambda_k)` in the eigenbasis of :math:`\Lambda`, with :math:`Q` the covariance of
  :math:`\tfrac{N}{|B|}\sum_{i \in B} \nabla\log p(y_i \mid \beta)` for a random :math:`|B|`-subset, averaged over
  the posterior (:func:`minibatch_noise`). The collection's batches run through a permutation per epoch, whose
  errors cancel over the epoch, so this is an upper bound: at :math:`\epsilon = 10^{-3}`, :math:`|B| = 10`, 8 x
  40,000 steps, the variances came out 1.056, 1.063, 1.033 times :math:`S_{kk}` against 1.045, 1.053, 1.038 from the
  discretisation alone and 1.17, 1.18, 1.12 with the bound (full batches: 1.033, 1.048, 1.032). At
  :math:`\epsilon = 2\times 10^{-4}`, :math:`|B| = 20` the bound is 1.6-1.8% in the whitened diagonal, against
  standard errors of 6-8%.
* pSGLD: SGLD in the coordinates :math:`G^{-1/2}\beta` with :math:`\Lambda \to G^{1/2}\Lambda G^{1/2}`, for each
  chain's gain :math:`G` (frozen after the burn-in, ``posterior.extras["preconditioner"]``; about
  :math:`N/\sqrt{\Lambda_{kk}} \approx 2.8`, as :math:`\mathbb{E}[g g^\top] = \Lambda` under the posterior), averaged
  over the chains: about 1% at :math:`\epsilon = 7\times 10^{-5}`, against standard errors of 4-5%. Far from the mode
  pSGLD moves about :math:`\epsilon N/2` per step (:math:`G g \approx N\,\mathrm{sign}(g)`), hence its longer burn-in.
* SGHMC, full batch: variance :math:`\lambda^{-1}(1 - \eta\lambda/(2(2 - \alpha)))^{-1}` along each eigenvector
  (the discrete Lyapunov equation of the 2x2 update per eigenvector): 0.5% at :math:`\eta = 10^{-4}`,
  :math:`\alpha = 0.1`, against standard errors of 2-3%.

The quick versions run 8-40 chains side by side (one autograd pass serves the full-batch ones) for a few thousand
steps, a few seconds each; the slow ones (``-m slow``, 20 s to 2.5 min each) about ten times as many draws with
smaller steps, standard errors of 0.7-2.8% and biases of 0.2-0.8%, and must reach max R-hat < 1.05. Every checked
mean needs at least ``MIN_ESS`` effective draws, so a chain that has not burnt in fails instead of passing on a huge
standard error.
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.inference.sgmcmc import ConvergenceWarning

from tests.conftest import default_dtype
from tests.support.conjugate import NOISE, NUM_DATA, conjugate_problem

BIAS_SHARE = 0.5  # the stationary bias must stay below this many standard errors of each checked entry
MIN_ESS = 100  # every checked mean needs this many effective draws: fewer make the standard error itself unreliable


def eigen(conjugate) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:math:`\\Lambda`, its eigenvalues and eigenvectors."""
    precision = np.linalg.inv(conjugate.cov.numpy())
    values, vectors = np.linalg.eigh(precision)
    return precision, values, vectors


def minibatch_noise(conjugate, batch_size: int) -> np.ndarray:
    r""":math:`Q`: the covariance of the minibatch estimate of the likelihood gradient, averaged over the posterior."""
    phi = np.hstack([conjugate.x.numpy(), np.ones((NUM_DATA, 1))])
    y, mean, cov = conjugate.y.numpy(), conjugate.mean.numpy(), conjugate.cov.numpy()
    residual_square = (y - phi @ mean) ** 2 + np.einsum("ik,kl,il->i", phi, cov, phi)  # E[(y_i - phi_i' beta)^2]
    second = np.einsum("ik,il,i->kl", phi, phi, residual_square) / NUM_DATA / NOISE**4  # E[mean_i a_i a_i']
    centre = phi.T @ (y - phi @ mean) / NUM_DATA / NOISE**2  # E[mean_i a_i]
    gram = phi.T @ phi / NOISE**2
    mean_outer = np.outer(centre, centre) + gram @ cov @ gram / NUM_DATA**2  # E[abar abar']
    finite = NUM_DATA**2 * (NUM_DATA - batch_size) / (batch_size * (NUM_DATA - 1))
    return finite * (second - mean_outer)


def sgld_stationary(precision: np.ndarray, step: float, noise: np.ndarray | None = None) -> np.ndarray:
    """The stationary covariance of SGLD on a Gaussian of ``precision`` (with minibatch ``noise``, to first order)."""
    values, vectors = np.linalg.eigh(precision)
    noise = np.zeros_like(precision) if noise is None else vectors.T @ noise @ vectors
    denominator = (values[:, None] + values[None, :]) / 2 - step / 4 * np.outer(values, values)
    return vectors @ ((np.eye(len(values)) + step / 4 * noise) / denominator) @ vectors.T


def stationary_bias(conjugate, method: str, options: dict, posterior) -> np.ndarray:
    """The stationary covariance of the sampler on the conjugate posterior minus :math:`S` (see the module notes)."""
    precision, values, vectors = eigen(conjugate)
    step = options["step_size"]
    if method == "sghmc":
        friction = options["friction"]
        stationary = vectors @ np.diag(1 / (values * (1 - step * values / (2 * (2 - friction))))) @ vectors.T
    elif options.get("precondition") == "rmsprop":  # each chain's own frozen gain; the chains share the exact mean
        roots = np.sqrt(conjugate.flatten(posterior.extras["preconditioner"]).numpy())  # (chains, 3): G^(1/2)
        stationary = np.mean([root[:, None] * sgld_stationary(root[:, None] * precision * root, step) * root
                              for root in roots], axis=0)
    else:
        batch = options.get("batch_size")
        stationary = sgld_stationary(precision, step, None if batch is None else minibatch_noise(conjugate, batch))
    return stationary - conjugate.cov.numpy()


def check_against_exact(conjugate, posterior, bias: np.ndarray) -> None:
    """The means and the whitened covariance match the exact posterior (module notes), and ``bias`` is negligible."""
    draws = conjugate.flatten(posterior.samples).numpy()  # (chains, draws, 3)
    exact_mean, exact_cov = conjugate.mean.numpy(), conjugate.cov.numpy()
    for k in range(draws.shape[-1]):
        ess = az.ess(draws[..., k], method="mean")
        assert ess >= MIN_ESS, (k, ess)
        mcse = draws[..., k].std() / np.sqrt(ess)
        assert abs(draws[..., k].mean() - exact_mean[k]) < 4 * mcse, (k, draws[..., k].mean(), exact_mean[k], mcse)
    factor = np.linalg.cholesky(exact_cov)
    whitened = np.linalg.solve(factor, (draws - exact_mean)[..., None])[..., 0]
    whitened_bias = np.linalg.solve(factor, np.linalg.solve(factor, bias).T)  # L^-1 bias L^-T
    for j in range(3):
        for k in range(j, 3):
            products = whitened[..., j] * whitened[..., k]
            ess = az.ess(products, method="mean")
            assert ess >= MIN_ESS, (j, k, ess)
            standard_error = products.std() / np.sqrt(ess)
            assert abs(whitened_bias[j, k]) < BIAS_SHARE * standard_error, (j, k, whitened_bias[j, k], standard_error)
            assert abs(products.mean() - (j == k)) < 4 * standard_error, (j, k, products.mean(), standard_error)


QUICK = {  # chains from prior draws at a given step: the stationary law at that step is what is tested
    "sgld": dict(init="prior", step_size=2e-4, batch_size=20, num_chains=8, num_warmup=500, num_samples=2500, thin=1),
    "psgld": dict(init="prior", step_size=7e-5, precondition="rmsprop", num_chains=16, num_warmup=3000, num_samples=2500, thin=1),
    # many short chains (side by side, one full-batch autograd pass serves them all): 40 x 625 draws after 500 burn-in
    # steps, 1,125 steps in all; their standard errors (about 2.5% on the whitened variances) keep the bias below half
    # of one at the temperatures tested here (the tempered test: 1.1%); seeds 1-5 passed both tests
    "sghmc": dict(init="prior", step_size=1e-4, friction=0.1, num_chains=40, num_warmup=500, num_samples=625, thin=1),
}
SLOW = {
    "sgld": dict(init="prior", step_size=1e-4, batch_size=20, num_chains=8, num_warmup=1000, num_samples=9000, thin=5),
    "psgld": dict(init="prior", step_size=4e-5, precondition="rmsprop", num_chains=16, num_warmup=4000, num_samples=6000, thin=5),
    "sghmc": dict(init="prior", step_size=5e-5, friction=0.1, num_chains=16, num_warmup=1000, num_samples=6000, thin=5),
}


def run(conjugate, name: str, options: dict):
    method = "sghmc" if name == "sghmc" else "sgld"
    with warnings.catch_warnings():  # a quick run's R-hat over a few effective draws per chain may exceed 1.01
        warnings.simplefilter("ignore", ConvergenceWarning)
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), method, seed=1, progress=False, **options)
    check_against_exact(conjugate, posterior, stationary_bias(conjugate, method, options, posterior))
    return posterior


@pytest.mark.long
@pytest.mark.parametrize("name", QUICK)
def test_matches_the_exact_posterior(conjugate, name):
    run(conjugate, name, QUICK[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_matches_the_exact_posterior_long_run(conjugate, name):
    assert run(conjugate, name, SLOW[name]).record.diagnostics.r_hat_max < 1.05


@pytest.mark.long
def test_tempered_chains_sample_the_exact_tempered_posterior():
    """At ``temperature=0.5`` SGHMC's chains sample the conjugate posterior with the noise variance halved
    (:mod:`tests.support.conjugate`), the bias of its discretisation computed for that posterior's precision."""
    with default_dtype(torch.float64):
        tempered = conjugate_problem(temperature=0.5)
        run(tempered, "sghmc", {**QUICK["sghmc"], "temperature": 0.5})


@pytest.mark.parametrize("method, share", [("sgld", 1.0), ("sghmc", 0.25)])
def test_by_default_the_chains_start_at_the_mode_with_the_step_share_over_the_largest_precision(conjugate, method, share):
    r"""On the conjugate posterior the MAP is the posterior mean and the Hessian of the negative log joint is the
    posterior precision :math:`\Lambda`, so each chain's first step is ``step_share`` over its largest eigenvalue (the
    power iteration approaches it from below) and its first draw lies near the mean. The draws' law at that step is
    the one :func:`test_matches_the_exact_posterior` checks; its known bias: SGLD's variance along the stiffest
    eigenvector is :math:`(1 - s/4)^{-1} = 4/3` of the posterior's at :math:`s = 1`, SGHMC's
    :math:`(1 - s/(2(2 - \alpha)))^{-1} = 1.07` at :math:`s = 0.25`, :math:`\alpha = 0.05`; the others less."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), method, seed=0, progress=False, num_warmup=0,
                        num_samples=4, thin=1, map_method="sequential")
    largest = eigen(conjugate)[1].max()
    record = posterior.record
    assert record.options.step_share == share and record.map_converged == [True, True]
    assert record.curvature == pytest.approx([largest] * 2, rel=0.02)
    assert record.step_sizes == pytest.approx([share / largest] * 2, rel=0.02)
    first = conjugate.flatten({name: value[:, :1] for name, value in posterior.samples.items()}).numpy()[:, 0]
    spread = np.sqrt(np.diag(conjugate.cov.numpy()))
    assert np.all(np.abs(first - conjugate.mean.numpy()) < 6 * spread)  # one step from the mode: within its noise
