"""The empirical-Bayes guide: its KL at the optimal prior variance, its ELBO, its fit, and where the prior variances go."""

from __future__ import annotations

import math
import re

import arviz as az
import pyro
import pytest
import torch
import torch.nn.functional as F
from bnn.datasets import load_toy1d
from bnn.guides import GUIDES, EmpiricalBayesGuide, build_guide
from bnn.guides.empirical_bayes import empirical_bayes_kl
from bnn.guides.kl import gaussian_kl
from bnn.inference import Posterior, fit
from bnn.inference.evaluation import evaluate
from bnn.models import PRIORS, BayesianMLP, GaussianPrior
from pyro.infer import JitTrace_ELBO, Trace_ELBO

from bnn.cli.main import main
from tests.support.conjugate import CHAIN_LOC_LR, NOISE, PRIOR_SCALE, batch_means, stationary_sgd_chain
from tests.support.prior_examples import BY_NAME, HIERARCHICAL


@pytest.fixture(autouse=True)
def isolated_param_store():
    with pyro.get_param_store().scope():
        yield


def test_registered_and_built_by_name(conjugate):
    assert "empirical-bayes" in GUIDES.names()
    guide, name = build_guide("empirical-bayes", conjugate.model)
    assert isinstance(guide, EmpiricalBayesGuide) and name == "empirical-bayes"
    with pytest.raises(ValueError, match="init_gamma must be a finite number"):
        EmpiricalBayesGuide(conjugate.model, init_gamma=math.inf)
    with pytest.raises(ValueError, match="init_gamma must be a finite number or 'prior', got 'median'"):
        EmpiricalBayesGuide(conjugate.model, init_gamma="median")


def test_the_default_start_is_a_prior_draw_of_the_means_with_small_scales():
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    torch.manual_seed(3)
    guide = EmpiricalBayesGuide(model)
    torch.manual_seed(3)
    expected = guide.flatten(guide.prior_start())  # the weights drawn from N(0, 1), the noise at its prior median
    params = guide.flat_parameters()
    torch.testing.assert_close(params["scale"], torch.full_like(expected, F.softplus(torch.tensor(-3.0)).item()))
    torch.testing.assert_close(params["loc"], expected)
    assert expected[: guide.num_weights].std() > 0.3  # distinct means: the hidden units start as distinct functions


@pytest.mark.long
def test_the_default_start_fits_where_every_mean_at_zero_stays_a_constant_function():
    """gamma = 0 makes every hidden unit the same function with KL 0: SVI stays there and predicts the mean,
    with an RMSE of the targets' own spread; from a prior draw the same budget fits the sine."""
    toy = load_toy1d()
    spread = toy.y_test.std(unbiased=False).item() * float(toy.y_scaler.std)
    rmse = {}
    for label, options in (("default", {}), ("gamma 0", {"init_gamma": 0.0})):
        model = BayesianMLP(1, 1, hidden=(20,), activation="tanh", likelihood={"name": "gaussian", "scale": None})
        posterior = fit(model, toy, "svi", guide="empirical-bayes", guide_options=options, steps=500, seed=0,
                        progress=False, num_samples=100)
        rmse[label] = evaluate(posterior, toy)["test_rmse"]
    assert rmse["gamma 0"] > 0.9 * spread and rmse["default"] < 0.4 * spread, (rmse, spread)


def precision_kl(loc, scale, precision):
    """The Gaussian KL to N(0, 1/precision)."""
    return gaussian_kl(loc, scale, precision.rsqrt())


def test_the_kl_is_the_gaussian_kl_at_the_optimal_prior_variance_where_its_precision_derivative_vanishes():
    generator = torch.Generator().manual_seed(0)
    loc = torch.randn(50, generator=generator, dtype=torch.float64) * 2
    scale = torch.rand(50, generator=generator, dtype=torch.float64) + 0.05
    optimal = (1 / (loc**2 + scale**2)).requires_grad_()
    kl = precision_kl(loc, scale, optimal)
    torch.testing.assert_close(kl, empirical_bayes_kl(loc / scale))
    torch.testing.assert_close(kl, 0.5 * torch.log1p(loc**2 / scale**2))
    (gradient,) = torch.autograd.grad(kl.sum(), optimal)
    torch.testing.assert_close(gradient, torch.zeros_like(gradient), atol=1e-12, rtol=0)
    # the derivative has power: away from the optimum it is not zero, and the optimum is a minimum
    away = (2 * optimal.detach()).requires_grad_()
    (gradient_away,) = torch.autograd.grad(precision_kl(loc, scale, away).sum(), away)
    assert (gradient_away.abs() > 1e-3).all()
    for factor in (0.8, 1.25):
        assert (precision_kl(loc, scale, factor * optimal.detach()) > kl.detach()).all()


def test_the_elbo_is_the_expected_log_likelihood_minus_the_empirical_bayes_kl_whatever_the_prior_scale(conjugate):
    r"""For the linear model :math:`E_q[\log p(y \mid \beta)]` is closed form; the ELBO estimate averages to
    it minus :math:`\tfrac12\sum\ln(1+\gamma^2)` within 4 standard errors, and a Gaussian prior's scale plays
    no part (the same draws give the same ELBO under two scales)."""
    model, x, y = conjugate.model, conjugate.x, conjugate.y
    pyro.set_rng_seed(0)
    guide = EmpiricalBayesGuide(model, init_rho=-1.5, init_gamma=0.5)
    loc_scale = guide.site_loc_scale()
    mu = conjugate.flatten({k: v[0] for k, v in loc_scale.items()}).detach()
    sigma = conjugate.flatten({k: v[1] for k, v in loc_scale.items()}).detach()
    phi = torch.cat([x, torch.ones(len(x), 1)], 1)
    expected_log_lik = (
        -0.5 * len(y) * math.log(2 * math.pi * NOISE**2)
        - (((y - phi @ mu) ** 2).sum() + (phi**2 @ sigma**2).sum()) / (2 * NOISE**2)
    )
    exact = expected_log_lik - empirical_bayes_kl(mu / sigma).sum()
    elbo = Trace_ELBO(num_particles=200, vectorize_particles=True, max_plate_nesting=1)
    estimates = []
    for seed in range(30):
        pyro.set_rng_seed(seed)
        estimates.append(-elbo.loss(model, guide, x, y))
    estimates = torch.tensor(estimates)
    assert abs(estimates.mean() - exact) < 4 * estimates.std() / len(estimates) ** 0.5
    pyro.set_rng_seed(0)
    gaussian_prior = -elbo.loss(model, guide, x, y)
    other_scale = 7.0 * PRIOR_SCALE
    wide_model = BayesianMLP(x.shape[1], 1, hidden=(), prior=GaussianPrior(other_scale), likelihood=model.likelihood)
    pyro.set_rng_seed(0)
    wide_prior = -elbo.loss(wide_model, EmpiricalBayesGuide(wide_model, init_rho=-1.5, init_gamma=0.5), x, y)
    assert wide_prior == pytest.approx(gaussian_prior, rel=1e-9)


def empirical_bayes_objective(conjugate, mu: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    r"""The expected negative ELBO :math:`-\mathbb{E}_q[\log p(y \mid \beta)] + \tfrac12\sum_k\ln(1 + \mu_k^2/\sigma_k^2)`
    (up to a constant) at means ``mu`` and log-scales ``log_sigma`` of shape ``(..., d + 1)``, shaped ``(...)``."""
    phi = torch.cat([conjugate.x, torch.ones(len(conjugate.x), 1)], 1)
    variance = torch.exp(2 * log_sigma)
    expected_residual = ((conjugate.y - mu @ phi.T) ** 2).sum(-1) + (variance @ (phi**2).T).sum(-1)
    return expected_residual / (2 * NOISE**2) + 0.5 * torch.log1p(mu**2 / variance).sum(-1)


def exact_empirical_bayes_optimum(conjugate) -> torch.Tensor:
    """The means and log-scales ``(2(d + 1),)`` minimising :func:`empirical_bayes_objective`, by L-BFGS."""
    theta = torch.cat([conjugate.mean, 0.5 * conjugate.meanfield_var.log()]).requires_grad_()
    optimiser = torch.optim.LBFGS([theta], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        loss = empirical_bayes_objective(conjugate, *theta.chunk(2))
        loss.backward()
        return loss

    optimiser.step(closure)
    return theta.detach()


# the log-scales' rate: 0.4 of the mean-field chain's, which keeps the chain's spread, and so the bias b below, small
# (relaxation time ~5 steps, batches of 37)
LOG_SCALE_LR = 0.1


def mean_and_log_scale_step(gamma_rho: torch.Tensor):
    r"""The ``step`` of :func:`tests.support.conjugate.stationary_sgd_chain` for ``gamma_rho``: SGD in :math:`(\mu, \ln\sigma)`.

    From the raw gradients, :math:`\partial_\mu = \partial_\gamma / \sigma` and
    :math:`\partial_{\ln\sigma} = \sigma\,\partial_\rho / \sigma'(\rho) - \gamma\,\partial_\gamma`
    (as :math:`\mu = \gamma\sigma`); the step moves :math:`\mu` and :math:`\ln\sigma` against them and
    sets :math:`\gamma = \mu/\sigma`, :math:`\rho = \ln(e^\sigma - 1)`.
    """

    def step(grads):
        (grad,) = grads
        gamma, rho = gamma_rho
        sigma = F.softplus(rho)
        mu_grad = grad[0] / sigma
        log_sigma_grad = sigma * grad[1] / torch.sigmoid(rho) - gamma * grad[0]
        mu = gamma * sigma - CHAIN_LOC_LR * mu_grad
        sigma = sigma * torch.exp(-LOG_SCALE_LR * log_sigma_grad)
        gamma_rho.copy_(torch.stack([mu / sigma, torch.log(torch.expm1(sigma))]))

    return step


@pytest.mark.long
def test_fit_reaches_the_exact_empirical_bayes_optimum_and_stores_the_prior_variances(conjugate, tmp_path):
    r"""The fit ends at the optimum :math:`\theta^*` of the closed-form objective :math:`\bar F` (means and log-scales).

    SGD in :math:`\theta = (\mu, \ln\sigma)` from the fit's end has :math:`\mathbb{E}[\nabla\bar F(\theta_t)] = 0`
    at stationarity, exactly: the Newton steps :math:`J^{-1}\nabla\bar F(\theta_t)` (:math:`J` the Hessian at
    :math:`\theta^*`) average to zero within 4 batch-means standard errors. :math:`\bar F` is not quadratic, so
    the chain's average is off :math:`\theta^*` by that average plus the deterministic bias
    :math:`b = -J^{-1}\,\overline{r}`, :math:`r_t = \nabla\bar F(\theta_t) - J(\theta_t - \theta^*)`, computed
    exactly from the closed form; the fit ended within 4 of the chain's stationary standard deviations of
    :math:`\theta^* + b` (see :func:`tests.support.conjugate.check_meanfield_optimum`). The prior variances reach the
    InferenceData and the saved posterior.
    """
    optimum = exact_empirical_bayes_optimum(conjugate)
    posterior = fit(
        conjugate.model, (conjugate.x, conjugate.y), guide="empirical-bayes", guide_options={"init_rho": -2.5},
        steps=1500, lr=0.05, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8, jit=True, seed=1,
        progress=False, num_samples=10,
    )
    guide = posterior.extras["guide"]
    prior_variances = guide.prior_variances()

    def mean_and_log_scale():
        loc_scale = guide.site_loc_scale()
        mu = conjugate.flatten({name: value[0] for name, value in loc_scale.items()})
        sigma = conjugate.flatten({name: value[1] for name, value in loc_scale.items()})
        return torch.cat([mu, sigma.log()]).detach()

    fitted = mean_and_log_scale()
    (gamma_rho,) = guide.parameters()
    elbo = JitTrace_ELBO(num_particles=8, vectorize_particles=True, max_plate_nesting=1, ignore_jit_warnings=True)
    model, scored_guide = guide.elbo_pair()
    chain = stationary_sgd_chain(lambda: elbo.differentiable_loss(model, scored_guide, conjugate.x, conjugate.y),
                                 [gamma_rho], mean_and_log_scale_step(gamma_rho), mean_and_log_scale, steps=1500)
    objective = lambda theta: empirical_bayes_objective(conjugate, *theta.chunk(2, dim=-1))  # noqa: E731
    hessian = torch.autograd.functional.hessian(objective, optimum)
    iterates = chain.clone().requires_grad_()
    (gradients,) = torch.autograd.grad(objective(iterates).sum(), iterates)
    newton_steps = torch.linalg.solve(hessian, gradients.T).T
    mean_step, standard_error = batch_means(newton_steps)
    assert (mean_step.abs() < 4 * standard_error).all(), mean_step / standard_error
    bias = -torch.linalg.solve(hessian, (gradients - (chain - optimum) @ hessian).mean(0))
    assert ((fitted - optimum - bias).abs() < 4 * chain.std(0)).all(), (fitted - optimum - bias) / chain.std(0)

    stored = {name: torch.as_tensor(posterior.constants[f"prior_variance.{name}"]) for name in prior_variances}
    torch.testing.assert_close(stored, prior_variances)
    idata = posterior.to_inference_data()
    assert idata.constant_data["prior_variance.layers.0.weight"].shape == (1, 2)
    loaded = Posterior.load(posterior.save(tmp_path / "eb"))
    assert set(loaded.constants) == {f"prior_variance.{name}" for name in prior_variances}
    torch.testing.assert_close(torch.as_tensor(loaded.constants["prior_variance.layers.0.bias"]),
                               prior_variances["layers.0.bias"])


def test_cli_fits_with_a_gaussian_prior_and_saves_the_prior_variances(tmp_path):
    out = tmp_path / "eb"
    main(["fit", "--dataset", "toy1d", "--guide", "empirical-bayes", "--prior", "gaussian", "--hidden", "8",
          "--steps", "20", "--num-samples", "20", "--out", str(out), "--quiet"])
    idata = az.from_netcdf(str(out / "posterior.nc"))
    assert idata.constant_data["prior_variance.layers.0.weight"].shape == (8, 1)
    assert bool((idata.constant_data["prior_variance.layers.1.bias"] > 0).all())


NON_GAUSSIAN = [name for name in BY_NAME if not issubclass(PRIORS.get(name), GaussianPrior) and name not in HIERARCHICAL]
"""The fixed non-Gaussian priors (SVI refuses the hierarchical ones with any guide but autonormal, before it builds one:
tests/models/test_hierarchical_priors.py)."""
REFUSAL = ("needs a Gaussian prior; sites .*{prior}.* use prior 'gaussian' .*its scale plays no part because the "
           "variance is learned")


@pytest.mark.parametrize("prior", NON_GAUSSIAN)
def test_a_non_gaussian_prior_is_refused_in_code_and_on_the_command_line(prior, tmp_path, capsys):
    assert NON_GAUSSIAN  # the collection has priors to refuse
    model = BayesianMLP(1, 1, hidden=(3,), prior={"*": "gaussian", "layers.1.weight": prior})
    with pytest.raises(ValueError, match=REFUSAL.format(prior=f"'layers.1.weight': '{prior}'")):
        EmpiricalBayesGuide(model)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--dataset", "toy1d", "--guide", "empirical-bayes", "--prior", prior, "--hidden", "2",
              "--steps", "2", "--out", str(tmp_path / "x"), "--quiet"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert re.search(REFUSAL.format(prior=f"'layers.0.weight': '{prior}'"), error), error
    assert not (tmp_path / "x").exists()
