r"""Every method against the closed-form posterior of Bayesian linear regression (tests/support/conjugate.py).

Each method registers what it must match in ``CHECKS``:

* ``svi`` (AutoNormal, mean field): from the fit's end, SGD steps whose stationary mean is
  exactly the mean-field optimum (:func:`tests.support.conjugate.stationary_sgd_chain`): their
  average equals :math:`m` and the variances :math:`1/\Lambda_{kk}` within 4 batch-means
  standard errors, lies below :math:`S_{kk}` by more than 4 of them, and the fit ended
  within 4 of the chain's stationary standard deviations of it.
* ``nuts`` (each engine, nutpie and Pyro): means within 4 Monte Carlo standard errors :math:`\mathrm{sd}/\sqrt{\mathrm{ESS}}`
  of :math:`m`, and variances within 4 relative standard errors :math:`\sqrt{2/\mathrm{ESS}}`
  of :math:`S_{kk}` (ESS of the squared deviations), with ArviZ's ESS over both chains.
* ``laplace`` (GGN, full): the GGN is the exact Hessian of this model, so the mean and
  covariance of :math:`\mathcal{N}(\theta_{MAP}, \Lambda^{-1})` equal :math:`m` and :math:`S`
  to 1e-4 relative (no Monte Carlo error: the mode and curvature are deterministic).
* ``map``: the mode is :math:`m`; the polish stops at a Newton decrement
  :math:`\delta = \lVert\theta - m\rVert_\Lambda \le` ``map_tolerance``, so each entry lies within
  ``map_tolerance`` :math:`\sqrt{S_{kk}}` of :math:`m_k`.

Each runs on three networks of the same regression: the collection's MLP without hidden layers,
:class:`SlopeIntercept`, a network written here on the model interface (not an MLP: other sites, its own
``forward``, no chain of dense layers), which NUTS evaluates through its torch potential, and a ``torch.nn.Linear``
made Bayesian by :func:`~bnn.models.from_module` (its forward a ``functional_call`` mapped over the draws).
"""

from __future__ import annotations

from typing import Any

import arviz as az
import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.models import ARCHITECTURES, BayesianMLP, BayesianNetwork, WeightSite, from_module

from tests.conftest import default_dtype
from tests.support.conjugate import NUM_FEATURES, autonormal_chain, check_meanfield_optimum, conjugate_problem


@ARCHITECTURES.register("test-slope-intercept")
class SlopeIntercept(BayesianNetwork):
    r""":math:`f(x) = x\,s^\top + c`, written on the model interface with its own sites and ``forward``."""

    def __init__(self, in_features: int, *, prior="gaussian", likelihood="gaussian") -> None:
        sites = (WeightSite("slope", 0, torch.Size((1, in_features)), in_features),
                 WeightSite("intercept", 0, torch.Size((1,)), 1))
        super().__init__(in_features, 1, sites, prior=prior, likelihood=likelihood)

    def forward(self, x: torch.Tensor, weights) -> torch.Tensor:
        return torch.einsum("nd,...od->...no", x, weights["slope"]) + weights["intercept"].unsqueeze(-2)

    def arguments(self) -> dict[str, Any]:
        return {"in_features": self.in_features}


NETWORKS = {
    "mlp": lambda: BayesianMLP(NUM_FEATURES, 1, hidden=()),
    "written-here": lambda: SlopeIntercept(NUM_FEATURES),
    "torch-module": lambda: from_module(torch.nn.Linear(NUM_FEATURES, 1)),  # sites "weight" (1, d), then "bias"
}


@pytest.fixture(scope="module")
def problem(request):
    """The conjugate problem on each of :data:`NETWORKS`, in float64 for the module."""
    with default_dtype(torch.float64):
        yield conjugate_problem(model=NETWORKS[request.param]())


def check_svi(conjugate, posterior):
    fitted, chain = autonormal_chain(conjugate, posterior)
    mean, standard_error = check_meanfield_optimum(conjugate, chain, fitted)
    # mean field underestimates: the variances lie below the full posterior's S_kk (2.7-9% above 1/Lambda_kk);
    # 64 particles make the standard errors small enough (~0.4%) for the check to tell the two apart
    d = len(conjugate.mean)
    assert (mean[d:] + 4 * standard_error[d:] < conjugate.cov.diagonal()).all()


def check_nuts(conjugate, posterior):
    assert posterior.record.converged, posterior.record.diagnostics
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


def check_map(conjugate, posterior):
    tolerance = CHECKS["map"][0]["map_tolerance"]
    theta = conjugate.flatten({name: value[0, 0] for name, value in posterior.samples.items()})
    assert ((theta - conjugate.mean).abs() <= tolerance * conjugate.cov.diagonal().sqrt()).all()


CHECKS = {
    "svi": (dict(guide="autonormal", steps=1500, lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8,
                 guide_options={"init_scale": 0.05}), check_svi),
    # 2 x 1000 draws: with 2 x 300, the R-hat of exact draws of this Gaussian reached 1.013 (seed 0, init at the MAP)
    "nuts": (dict(num_warmup=300, num_samples=1000, num_chains=2, chain_method="sequential"), check_nuts),
    "laplace": (dict(hessian="ggn", structure="full", map_steps=200, map_tolerance=1e-4, tune_prior_precision=False),
                check_laplace),
    "map": (dict(map_steps=200, map_tolerance=1e-4), check_map),
}


FITS = [(method, None) for method in sorted(set(CHECKS) - {"nuts"})] + [("nuts", "nutpie"), ("nuts", "pyro")]
"""Each method once, NUTS on each engine."""
SLOW_FITS = {("mlp", "nuts", "pyro"), ("written-here", "nuts", "pyro"), ("torch-module", "nuts", "pyro"),
             ("written-here", "svi", None), ("torch-module", "svi", None)}
"""In the slow tier: Pyro's NUTS (make test runs it in the tempered test) and SVI on the two networks that are not the
MLP (make test runs SVI's check on the MLP, tempered too; the network's log joint, all SVI sees of it, is what the MAP's
and Laplace's checks test on every network)."""


@pytest.mark.long
@pytest.mark.parametrize("problem, method, engine", [
    pytest.param(network, method, engine, id=f"{network}-{method}-{engine}",
                 marks=pytest.mark.slow if (network, method, engine) in SLOW_FITS else ())
    for network in sorted(NETWORKS) for method, engine in FITS], indirect=["problem"])
def test_method_matches_the_exact_posterior(problem, method, engine):
    options, check = CHECKS[method]
    options = options if engine is None else {**options, "engine": engine}
    posterior = fit(problem.model, (problem.x, problem.y), method, seed=1, progress=False, **options)
    check(problem, posterior)


TEMPERATURE = 0.5  # a cold posterior: the conjugate one with the noise variance halved (tests/support/conjugate.py)
TEMPERED = {"svi": CHECKS["svi"], "nuts": CHECKS["nuts"], "laplace": CHECKS["laplace"]}


@pytest.fixture(scope="module")
def tempered():
    """The conjugate problem of the collection's MLP tempered at :data:`TEMPERATURE`, in float64 for the module."""
    with default_dtype(torch.float64):
        yield conjugate_problem(temperature=TEMPERATURE)


@pytest.mark.long
@pytest.mark.parametrize(
    "method, engine", [(method, None) for method in sorted(set(TEMPERED) - {"nuts"})] + [("nuts", "nutpie"), ("nuts", "pyro")]
)
def test_tempered_fit_matches_the_exact_tempered_posterior(tempered, method, engine):
    """At ``temperature=T`` each method (NUTS on each engine: the nutpie one on the flat potential's torch backend, Pyro's
    on the tempered trace) meets its check of the untempered case against the tempered posterior, whose covariance
    differs from the untempered one by far more than the checks' tolerances (a factor of about 2)."""
    options, check = TEMPERED[method]
    options = options if engine is None else {**options, "engine": engine}
    posterior = fit(tempered.model, (tempered.x, tempered.y), method, seed=1, progress=False, temperature=TEMPERATURE,
                    **options)
    check(tempered, posterior)
    assert posterior.record.label.endswith(f"(T={TEMPERATURE:g})")


@pytest.mark.gpu
@pytest.mark.long
@pytest.mark.parametrize("problem, method", [("mlp", method) for method in sorted(set(CHECKS) - {"nuts"})],
                         indirect=["problem"])
def test_method_matches_the_exact_posterior_on_a_gpu(problem, method):
    """The same checks with the fit computed on a GPU (NUTS computes on the CPU)."""
    options, check = CHECKS[method]
    posterior = fit(problem.model, (problem.x, problem.y), method, seed=1, progress=False, device="cuda", **options)
    assert posterior.record.device == "cuda"
    check(problem, posterior)
