r"""Simulation-based calibration of NUTS (Talts et al. 2018), both engines, on a tiny BNN.

If every draw of a sampler follows the exact posterior, then for parameters drawn from the prior,
:math:`\theta^* \sim p(\theta)`, data simulated from them, :math:`y \sim p(y \mid \theta^*)`, and
:math:`L` posterior draws :math:`\theta_1, \dots, \theta_L \sim p(\theta \mid y)`, the rank

.. math::

    r = \#\{l : g(\theta_l) < g(\theta^*)\} \in \{0, \dots, L\}

of any scalar function :math:`g` is uniform on :math:`\{0, \dots, L\}`. Over :math:`R` replications the
ranks, grouped into :math:`B` bins of equal width (expected count :math:`R / B \ge 5`), give Pearson's
:math:`\chi^2 = \sum_b (n_b - R/B)^2 / (R/B)` with :math:`B - 1` degrees of freedom; a function fails when its
p-value is below ``P_VALUE / len(FUNCTIONS)`` (0.001, Bonferroni over the functions), fixed before any run.

The functions: the output bias, the squared norm of the first layer's weights, :math:`f(x)` at three inputs,
and the log-likelihood :math:`\log p(y \mid \theta)` of the simulated data. All are invariant under the
hidden units' permutations and sign flips (the posterior is symmetric under them and a chain cannot hop between
its copies, so the rank of a single weight would fail by symmetry, not by a fault of the sampler). The
log-likelihood depends on the data (Modrák et al. 2023): it catches a sampler that ignores the data and returns
the prior, which every function of :math:`\theta` alone passes.

The short version (20 replications, 4 bins; the default run has nutpie's, Pyro's is slow-marked) is loose, but
``test_sbc_rejects_wrong_posteriors`` shows that it still fails for the prior in place of the posterior and
for NUTS under a noise scale three times too large or too small. The full versions (``-m slow``) run 200
replications of 100 draws, 20 bins.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.models import BayesianMLP
from scipy.stats import chi2

SIGMA = 0.3
X = torch.linspace(-2.0, 2.0, 20)[:, None]
X_CHECK = torch.tensor([[-1.5], [0.0], [1.5]])
P_VALUE = 0.001
FUNCTIONS = ["output bias", "first-layer norm^2", "f(-1.5)", "f(0)", "f(1.5)", "log-likelihood"]


def tiny_bnn(sigma: float = SIGMA) -> BayesianMLP:
    """The 1-3-1 tanh network, N(0, 1) on its 10 weights and biases, Gaussian noise fixed at ``sigma``."""
    return BayesianMLP(1, 1, hidden=(3,), activation="tanh", prior={"name": "gaussian"},
                       likelihood={"name": "gaussian", "scale": sigma})


def functions(model: BayesianMLP, theta: dict[str, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    """The tested functions of draws ``theta[site]`` ``(draws, *site_shape)``, shape ``(draws, len(FUNCTIONS))``."""
    with torch.no_grad():
        f_check = model.forward(X_CHECK, theta)[..., 0]
        f_train = model.forward(X, theta)[..., 0]
    log_likelihood = torch.distributions.Normal(f_train, SIGMA).log_prob(y).sum(-1)
    return torch.stack([theta["layers.1.bias"][:, 0], theta["layers.0.weight"].pow(2).sum((-2, -1)), *f_check.T,
                        log_likelihood], dim=-1)


def prior_draw(model: BayesianMLP, generator: torch.Generator, draws: int = 1) -> dict[str, torch.Tensor]:
    """``draws`` draws of the N(0, 1) prior on every site, ``(draws, *site_shape)``."""
    return {name: torch.randn(draws, *shape, generator=generator) for name, shape in model.latent_shapes.items()}


def nuts_sampler(engine: str, sigma: float = SIGMA, warmup: int = 100, init: str = "map"):
    """``sample(y, seed, L, generator)``: ``L`` draws of one NUTS chain (``warmup`` adaptation iterations, every other
    draw kept, started as ``init`` says) on the tiny BNN with noise ``sigma``."""

    def sample(y: torch.Tensor, seed: int, draws: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # a single chain's few divergences are SBC's to judge
            posterior = fit(tiny_bnn(sigma), (X, y), "nuts", engine=engine, num_warmup=warmup, num_samples=2 * draws,
                            num_chains=1, chain_method="sequential", init=init, seed=seed, progress=False)
        return {name: value[0, 1::2] for name, value in posterior.samples.items()}  # every other draw

    return sample


def prior_sampler(y: torch.Tensor, seed: int, draws: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """A wrong posterior: the prior, whatever the data say."""
    return prior_draw(tiny_bnn(), generator, draws)


def sbc_p_values(sample, replications: int, draws: int, bins: int, seed: int = 0) -> np.ndarray:
    """The chi-square p-value of the ranks of each function over ``replications`` runs of ``sample`` with ``draws``
    posterior draws each (``draws + 1`` rank values, a multiple of ``bins``)."""
    if (draws + 1) % bins or replications < 5 * bins:
        raise ValueError(f"need draws + 1 divisible by bins and replications >= 5 * bins, got {draws}, {bins}, {replications}")
    model, generator = tiny_bnn(), torch.Generator().manual_seed(seed)
    ranks = np.empty((replications, len(FUNCTIONS)), dtype=np.int64)
    for replication in range(replications):
        truth = prior_draw(model, generator)
        with torch.no_grad():
            y = model.forward(X, truth)[0, :, 0] + SIGMA * torch.randn(len(X), generator=generator)
        posterior = sample(y, seed + replication, draws, generator)
        ranks[replication] = (functions(model, posterior, y) < functions(model, truth, y)).sum(0).numpy()
    counts = np.stack([np.bincount(ranks[:, j] * bins // (draws + 1), minlength=bins) for j in range(len(FUNCTIONS))])
    expected = replications / bins
    return chi2.sf(((counts - expected) ** 2 / expected).sum(1), df=bins - 1)


def assert_calibrated(p_values: np.ndarray) -> None:
    print(dict(zip(FUNCTIONS, p_values.round(4))))  # shown with -s: the p-values measured
    threshold = P_VALUE / len(FUNCTIONS)
    failed = {name: float(p) for name, p in zip(FUNCTIONS, p_values) if p < threshold}
    assert not failed, f"ranks not uniform (p < {threshold:.2g}): {failed}; all p-values {dict(zip(FUNCTIONS, p_values))}"


SHORT = dict(replications=20, draws=19, bins=4)  # 20 rank values in 4 bins, 5 expected per bin
FULL = dict(replications=200, draws=99, bins=20)  # 100 rank values in 20 bins, 10 expected per bin


# Pyro's engine pays Python per leapfrog step: its short version took 400 s on a loaded 2-core machine, so it is slow.
# The short version starts each chain at a prior draw: the MAP start (1,000 Adam steps and a polish per replication) was
# two thirds of its time, and the full version keeps it
@pytest.mark.long
@pytest.mark.parametrize("engine", ["nutpie", pytest.param("pyro", marks=pytest.mark.slow)])
def test_sbc_short(engine):
    assert_calibrated(sbc_p_values(nuts_sampler(engine, init="prior"), **SHORT))


# the wrong posteriors' chains start at a prior draw: what is tested is the check's power against a wrong noise, which
# does not depend on the start, and the default MAP start's 1,000 Adam steps were most of each fit's time
@pytest.mark.long
@pytest.mark.parametrize("sample", [prior_sampler, nuts_sampler("nutpie", 3 * SIGMA, init="prior"),
                                    pytest.param(nuts_sampler("nutpie", SIGMA / 3, init="prior"), marks=pytest.mark.slow)],
                         ids=["prior", "noise x3", "noise /3"])  # make test: one wrong noise
def test_sbc_rejects_wrong_posteriors(sample):
    p_values = sbc_p_values(sample, **SHORT)
    assert p_values.min() < P_VALUE / len(FUNCTIONS), dict(zip(FUNCTIONS, p_values))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["nutpie", "pyro"])
def test_sbc_full(engine):
    assert_calibrated(sbc_p_values(nuts_sampler(engine, warmup=200), **FULL))
