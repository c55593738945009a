r"""Every method against the closed-form posterior of Bayesian linear regression (tests/conjugate.py).

Each method registers what it must match in ``CHECKS``:

* ``svi`` (AutoNormal, mean field): means equal :math:`m` and variances the mean-field
  optimum :math:`1/\Lambda_{kk}` (below :math:`S_{kk}`), within twice the gradient-noise
  error measured over three seeds.
* ``nuts`` (each engine, nutpie and Pyro): means within 4 Monte Carlo standard errors :math:`\mathrm{sd}/\sqrt{\mathrm{ESS}}`
  of :math:`m`, and variances within 4 relative standard errors :math:`\sqrt{2/\mathrm{ESS}}`
  of :math:`S_{kk}` (ESS of the squared deviations), with ArviZ's ESS over both chains.
* ``laplace`` (GGN, full): the GGN is the exact Hessian of this model, so the mean and
  covariance of :math:`\mathcal{N}(\theta_{MAP}, \Lambda^{-1})` equal :math:`m` and :math:`S`
  to 1e-4 relative (no Monte Carlo error: the mode and curvature are deterministic).
"""

from __future__ import annotations

from functools import reduce

import arviz as az
import numpy as np
import pytest
import torch

from inference import fit


def check_svi(conjugate, posterior):
    guide = posterior.extras["guide"]
    parameter = lambda group, name: reduce(getattr, name.split("."), group).detach()  # noqa: E731
    loc = conjugate.flatten({name: parameter(guide.locs, name) for name in conjugate.model.latent_shapes})
    scale = conjugate.flatten({name: parameter(guide.scales, name) for name in conjugate.model.latent_shapes})
    sd = conjugate.meanfield_var.sqrt()
    # What is left is the gradient noise of the final iterates (8 particles, lr annealed to 1e-4):
    # over seeds 1, 2, 3 the errors were at most 0.05 sd for the means and 2.2% for the variances
    # (measured with this test's options); the bounds are twice that. The full-covariance marginal
    # variances S_kk lie 3-9% above the mean-field optimum, so the last assertion separates the two.
    torch.testing.assert_close(loc, conjugate.mean, atol=0.1 * sd.min().item(), rtol=0)
    torch.testing.assert_close(scale**2, conjugate.meanfield_var, rtol=0.05, atol=0)
    assert torch.all(scale**2 < conjugate.cov.diagonal())


def check_nuts(conjugate, posterior):
    assert posterior.info["converged"], posterior.info["diagnostics"]
    draws = conjugate.flatten(posterior.samples).numpy()  # (chains, draws, d + 1)
    deviations = (draws - draws.mean(axis=(0, 1))) ** 2
    for k in range(draws.shape[-1]):
        mcse = draws[..., k].std() / np.sqrt(az.ess(draws[..., k], method="mean"))
        assert abs(draws[..., k].mean() - conjugate.mean[k].item()) < 4 * mcse
        exact_var = conjugate.cov[k, k].item()
        relative_se = np.sqrt(2 / az.ess(deviations[..., k], method="mean"))
        assert abs(deviations[..., k].mean() - exact_var) < 4 * relative_se * exact_var


def check_laplace(conjugate, posterior):
    guide = posterior.extras["guide"]
    torch.testing.assert_close(guide.mean, conjugate.mean, rtol=1e-4, atol=0)
    torch.testing.assert_close(guide.covariance(), conjugate.cov, rtol=1e-4, atol=0)


CHECKS = {
    "svi": (dict(steps=4000, lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8,
                 guide_options={"init_scale": 0.05}), check_svi),
    "nuts": (dict(num_warmup=300, num_samples=300, num_chains=2, chain_method="sequential"), check_nuts),
    "laplace": (dict(hessian="ggn", structure="full", map_steps=200, map_tolerance=1e-4), check_laplace),
}


@pytest.mark.parametrize(
    "method, engine", [(method, None) for method in sorted(set(CHECKS) - {"nuts"})] + [("nuts", "nutpie"), ("nuts", "pyro")]
)
def test_method_matches_the_exact_posterior(conjugate, method, engine):
    options, check = CHECKS[method]
    options = options if engine is None else {**options, "engine": engine}
    posterior = fit(conjugate.model, (conjugate.x, conjugate.y), method, seed=1, progress=False, **options)
    check(conjugate, posterior)
