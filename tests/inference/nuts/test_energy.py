r"""The ``energy`` statistic of both NUTS engines: the Hamiltonian at the start of each draw's trajectory.

:math:`E_n = U(z_{n-1}) + \tfrac{1}{2} r_n^\top M^{-1} r_n` with a fresh momentum :math:`r_n \sim \mathcal{N}(0, M)`,
so :math:`2(E_n - U(z_{n-1}))` are independent :math:`\chi^2_d` draws whatever the sampler did, exactly. On the
conjugate problem (:math:`d = 3`, no transform: :math:`U` is minus the log joint of the model's trace) the test
checks that, with tolerances from the Monte Carlo error of the draws; the energy at the drawn point (Stan's), or a
potential off by a constant, fails it.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
import torch
from bnn.inference import fit
from pyro import poutine
from scipy import stats

pytestmark = pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")
NUM_SAMPLES = 300


def potential(conjugate, values: dict[str, torch.Tensor]) -> float:
    """:math:`U(W) = -\\log p(y, W)` of the conjugate model at one draw (its sites need no transform)."""
    conditioned = poutine.condition(conjugate.model, data=values)
    return -float(poutine.trace(conditioned).get_trace(conjugate.x, conjugate.y).log_prob_sum())


@pytest.mark.long
@pytest.mark.parametrize("engine", ["nutpie", pytest.param("pyro", marks=pytest.mark.slow)])  # make test: the default
def test_energy_less_the_previous_potential_is_a_fresh_momentum(conjugate, engine):
    posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", num_warmup=100, num_samples=NUM_SAMPLES,
                    num_chains=2, chain_method="sequential", init="prior", engine=engine, jit_compile=False,
                    progress=False, seed=1)
    energy = posterior.sample_stats["energy"]
    assert energy.shape == (2, NUM_SAMPLES) and energy.dtype == np.float64
    dim = sum(value[0, 0].numel() for value in posterior.samples.values())
    twice_kinetic = np.array([
        2 * (energy[chain, draw + 1] - potential(conjugate, {name: value[chain, draw]
                                                             for name, value in posterior.samples.items()}))
        for chain in range(2) for draw in range(NUM_SAMPLES - 1)
    ])
    assert twice_kinetic.min() >= -1e-9  # a kinetic energy is never negative
    standard_error = np.sqrt(2 * dim / twice_kinetic.size)  # chi^2_d has variance 2d
    assert abs(twice_kinetic.mean() - dim) < 4 * standard_error
    assert stats.kstest(twice_kinetic, stats.chi2(dim).cdf).pvalue > 0.001


@pytest.mark.long
def test_arviz_reads_the_energy(conjugate):
    """``az.bfmi`` and ``az.plot_energy`` work on the posterior; a 3-d Gaussian posterior is explored well (E-BFMI
    far above Stan's warning level of 0.3)."""
    posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", num_warmup=100, num_samples=NUM_SAMPLES,
                    num_chains=2, chain_method="sequential", init="prior", jit_compile=False, progress=False, seed=2)
    idata = posterior.to_inference_data()
    bfmi = az.bfmi(idata)
    assert bfmi.shape == (2,) and np.all(bfmi > 0.3)
    axis = az.plot_energy(idata)
    assert axis.get_legend() is not None
