"""Subnetwork Laplace (``structure="subnetwork"``, :mod:`bnn.inference.laplace.subnetwork`) against what is exact.

On Bayesian linear regression (tests/support/conjugate.py) the Laplace approximation is exact, and with the weights
outside the subnetwork held at the MAP (the exact posterior mean) so is the subnetwork's: the Gaussian of
:math:`\\theta_S` given the rest, covariance :math:`(\\Lambda_{SS})^{-1}`, not the exact posterior's marginal
:math:`(\\Lambda^{-1})_{SS}`; its evidence is that of the model with the rest fixed. A subnetwork of every weight is
the full Laplace approximation. laplace-torch's ``SubnetLaplace`` is checked in ``test_laplace_torch_peer.py``.
"""

from __future__ import annotations

import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.core.weight_gaussians import weight_gaussians
from bnn.inference.laplace import fit as laplace_module
from bnn.inference.laplace.linearized import Linearization
from bnn.inference.laplace.precision import posterior_precision
from bnn.inference.laplace.subnetwork import largest_variance_indices
from bnn.models import BayesianMLP, GaussianPrior

from tests.support.conjugate import NOISE, PRIOR_SCALE

FAST = dict(map_steps=100, map_tolerance=1e-4, num_samples=50, tune_prior_precision=False, progress=False)
X_NEW = torch.tensor([[0.3, -1.2], [2.0, 0.5], [-3.0, 1.0]], dtype=torch.float64)


@pytest.fixture(scope="module")
def subnetwork(conjugate):
    """The conjugate model's subnetwork Laplace over two of its three weights."""
    return fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", structure="subnetwork", subnetwork_size=2, **FAST)


def features(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)


def test_the_largest_variances_are_chosen_and_ties_go_to_the_lower_index():
    precision = torch.tensor([2.0, 1.0, 3.0, 1.0, 0.5, 1.0])
    assert largest_variance_indices(precision, 3).tolist() == [1, 3, 4]


def test_on_the_conjugate_model_it_is_the_exact_conditional_posterior_and_evidence(conjugate, subnetwork):
    precision = torch.linalg.inv(conjugate.cov)  # the exact posterior precision, whose diagonal chooses
    chosen = torch.argsort(precision.diagonal())[:2].sort().values
    rest = torch.tensor([i for i in range(3) if i not in chosen.tolist()])
    assert subnetwork.record.subnetwork_indices == chosen.tolist() and subnetwork.record.num_weights_covered == 2
    guide = subnetwork.extras["guide"]
    assert bool(((guide.mean - conjugate.mean).abs() < 1e-4 * conjugate.cov.diagonal().sqrt()).all())  # the MAP
    conditional = torch.linalg.inv(precision[chosen][:, chosen])
    torch.testing.assert_close(guide.covariance(), conditional, rtol=1e-8, atol=0)
    marginal = conjugate.cov[chosen][:, chosen]
    assert (conditional - marginal).abs().max() > 1e-3 * marginal.abs().max()  # the check above tells them apart

    phi = features(conjugate.x)
    residual = conjugate.y - phi[:, rest] @ guide.mean[rest]  # the model with the rest fixed: linear-Gaussian in S
    covariance = NOISE**2 * torch.eye(len(residual)) + PRIOR_SCALE**2 * phi[:, chosen] @ phi[:, chosen].T
    exact = torch.distributions.MultivariateNormal(torch.zeros(len(residual)), covariance).log_prob(residual).item()
    assert subnetwork.record.log_marginal_likelihood == pytest.approx(exact, rel=1e-8)

    phi_new = features(X_NEW)[:, chosen]
    std = (NOISE**2 + ((phi_new @ conditional) * phi_new).sum(-1)).sqrt()
    torch.testing.assert_close(subnetwork.predict(X_NEW, predictive="linearized").std, std, rtol=1e-8, atol=0)
    draws = conjugate.flatten(subnetwork.samples).reshape(-1, 3)
    assert torch.equal(draws[:, rest], guide.mean[rest].expand(len(draws), -1))
    assert bool((draws[:, chosen].std(0) > 0).all())


def test_the_prior_precision_is_tuned_by_the_diagonal_laplace_evidence(conjugate):
    data, tuned = (conjugate.x, conjugate.y), {**FAST, "tune_prior_precision": True}
    diagonal = fit(conjugate.model, data, "laplace", structure="diag", **tuned)
    subnetwork = fit(conjugate.model, data, "laplace", structure="subnetwork", subnetwork_size=2, **tuned)
    assert subnetwork.record.prior_precision_multiplier == diagonal.record.prior_precision_multiplier != 1
    torch.testing.assert_close(subnetwork.extras["guide"].mean, diagonal.extras["guide"].mean, rtol=0, atol=0)


def test_save_and_load_keep_the_subnetwork(subnetwork, tmp_path):
    loaded = Posterior.load(subnetwork.save(tmp_path / "subnetwork"))
    assert loaded.record.subnetwork_indices == subnetwork.record.subnetwork_indices
    assert torch.equal(loaded.linearization.guide.indices, subnetwork.linearization.guide.indices)
    for moments, again in zip(subnetwork.linearization.output_moments(subnetwork.model, X_NEW),
                              loaded.linearization.output_moments(loaded.model, X_NEW), strict=True):
        torch.testing.assert_close(again, moments, rtol=1e-12, atol=0)


def test_it_is_no_gaussian_prior_for_the_weights_it_holds_at_the_map(subnetwork):
    with pytest.raises(ValueError, match="structure='subnetwork' holds the other weights at their MAP with no spread"):
        weight_gaussians(subnetwork)


@pytest.mark.long
def test_a_subnetwork_of_every_weight_is_the_full_laplace_approximation(float64):
    """A classifier, so that the probit and bridge links are compared too; the default size (1000) is capped at the
    network's 31 weights."""
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(40, 3, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    model = BayesianMLP(3, 3, hidden=(4,), prior=GaussianPrior(1.0), likelihood={"name": "categorical"})
    full = fit(model, (x, y), "laplace", structure="full", **FAST)
    every = fit(model, (x, y), "laplace", structure="subnetwork", **FAST)
    assert every.record.subnetwork_indices == list(range(31)) and every.record.num_weights_covered == 31
    torch.testing.assert_close(every.extras["guide"].mean, full.extras["guide"].mean, rtol=0, atol=0)
    torch.testing.assert_close(every.extras["guide"].covariance(), full.extras["guide"].covariance(), rtol=1e-10,
                               atol=1e-13)
    assert every.record.log_marginal_likelihood == pytest.approx(full.record.log_marginal_likelihood, rel=1e-12)
    x_new = 2 * torch.randn(5, 3, generator=generator)
    for link in ("probit", "bridge"):
        ours = Linearization(every.extras["guide"], link).predict(model, x_new, 2).probs
        torch.testing.assert_close(ours, Linearization(full.extras["guide"], link).predict(model, x_new, 2).probs,
                                   rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(structure="diag", subnetwork_size=5), "subnetwork_size=5 sets the weights of structure='subnetwork'; pass "
                                                    "structure='subnetwork' with it, or leave subnetwork_size out"),
        (dict(subnetwork_size=5), "subnetwork_size=5 sets the weights of structure='subnetwork'"),
        (dict(structure="subnetwork", subnetwork_size=0), "subnetwork_size must be a positive integer, got 0"),
        (dict(structure="subnetwork", hessian="exact"), "hessian='exact' with structure='subnetwork' is not offered"),
        (dict(structure="subnetwork", subnetwork_size=2, max_memory_gib=1e-12),
         "structure 'subnetwork' over 2 weights needs about 5 x 2\\^2 x 8 bytes = .*; use a smaller subnetwork_size, "),
    ],
)
def test_bad_options_are_refused_before_any_work(conjugate, options, message, monkeypatch):
    monkeypatch.setattr(laplace_module, "find_map", lambda *args, **kwargs: pytest.fail("work started"))
    with pytest.raises(ValueError, match=message):
        fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", progress=False, **options)


def test_posterior_precision_refuses_the_subnetwork_naming_the_full_block(conjugate, subnetwork):
    values = {name: value[0, 0] for name, value in subnetwork.samples.items()}
    with pytest.raises(ValueError, match="take structure='full' and its block over the fit's record.subnetwork_indices"):
        posterior_precision(conjugate.model, conjugate.x, conjugate.y, values, structure="subnetwork")
