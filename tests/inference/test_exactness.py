r"""Every method against the closed-form posterior of Bayesian linear regression (tests/conjugate.py).

Each method registers what it must match in ``CHECKS``:

* ``svi`` (AutoNormal, mean field): means equal :math:`m` and variances the mean-field
  optimum :math:`1/\Lambda_{kk}` (never above :math:`S_{kk}`), within Monte Carlo error of
  the stochastic optimisation, judged over the last iterates.
"""

from __future__ import annotations

from functools import reduce

import pytest
import torch

from inference import fit
from tests.conjugate import conjugate_problem


@pytest.fixture(scope="module")
def problem():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield conjugate_problem()
    torch.set_default_dtype(previous)


def check_svi(problem, posterior):
    guide = posterior.extras["guide"]
    parameter = lambda group, name: reduce(getattr, name.split("."), group).detach()  # noqa: E731
    loc = problem.flatten({name: parameter(guide.locs, name) for name in problem.model.latent_shapes})
    scale = problem.flatten({name: parameter(guide.scales, name) for name in problem.model.latent_shapes})
    sd = problem.meanfield_var.sqrt()
    # the stochastic optimum jitters by about lr * O(1) posterior sds; 0.25 sd is far below the
    # prior-to-posterior shrinkage (the prior sd is 1, the posterior sd about 0.07)
    torch.testing.assert_close(loc, problem.mean, atol=0.25 * sd.min().item(), rtol=0)
    torch.testing.assert_close(scale**2, problem.meanfield_var, rtol=0.2, atol=0)
    assert torch.all(scale**2 <= problem.cov.diagonal() * 1.1)


CHECKS = {
    "svi": (dict(steps=4000, lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8,
                 guide_options={"init_scale": 0.05}), check_svi),
}


@pytest.mark.parametrize("method", sorted(CHECKS))
def test_method_matches_the_exact_posterior(problem, method):
    options, check = CHECKS[method]
    posterior = fit(problem.model, (problem.x, problem.y), method, seed=1, progress=False, **options)
    check(problem, posterior)
