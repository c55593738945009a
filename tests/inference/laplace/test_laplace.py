"""The Laplace method behind ``fit``: against closed forms of Bayesian linear and logistic regression.

Bayesian linear regression (tests/support/conjugate.py) is linear-Gaussian, so its Laplace
approximation, linearised predictive and Laplace evidence are all exact:
:math:`p(y) = \\mathcal{N}(y; 0, \\sigma^2 I + s^2 \\Phi\\Phi^\\top)` and the predictive at
:math:`\\phi^*` is :math:`\\mathcal{N}(\\phi^{*\\top} m, \\sigma^2 + \\phi^{*\\top} S \\phi^*)`.
"""

from __future__ import annotations

import math

import numpy as np
import pyro
import pytest
import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference import Posterior, fit
from bnn.inference.laplace import fit as laplace_module
from bnn.inference.laplace.linearized import laplace_bridge
from bnn.inference.map_search.map_estimate import MapEstimate
from bnn.models import BayesianMLP, GaussianPrior, LaplacePrior
from scipy.optimize import minimize, minimize_scalar

from bnn.cli.main import main
from tests.support.conjugate import NOISE, PRIOR_SCALE

FAST = dict(map_steps=100, map_tolerance=1e-4, num_samples=200, tune_prior_precision=False, progress=False)  # mode to 1e-4 sd


@pytest.fixture(scope="module")
def posterior(conjugate):
    return fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", seed=3, **FAST)


def features(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)


def exact_log_evidence(conjugate, prior_variance: float) -> float:
    phi = features(conjugate.x)
    cov = NOISE**2 * torch.eye(phi.shape[0]) + prior_variance * phi @ phi.T
    return torch.distributions.MultivariateNormal(torch.zeros(phi.shape[0]), cov).log_prob(conjugate.y).item()


def test_info_and_inference_data_groups(conjugate, posterior):
    info = posterior.record.to_json()
    options = info["options"]
    assert (info["method"], info["guide"], options["hessian"], options["structure"]) == ("laplace", "laplace", "ggn", None)
    assert info["structure"] == "full" and "within max_memory_gib=2" in info["structure_reason"]  # the default's choice
    assert info["map_grad_norm"] < 1e-4 and info["prior_precision"] == {"layers.0.weight": 1.0, "layers.0.bias": 1.0}
    assert posterior.num_chains == 1 and posterior.num_draws == 200
    groups = set(posterior.to_inference_data().groups())
    assert {"posterior", "posterior_predictive", "log_likelihood", "observed_data", "constant_data"} <= groups


def test_log_marginal_likelihood_is_the_exact_evidence(conjugate, posterior):
    assert posterior.record.log_marginal_likelihood == pytest.approx(exact_log_evidence(conjugate, PRIOR_SCALE**2), rel=1e-8)


def test_tuned_prior_precision_is_the_type_2_maximum_likelihood_of_the_exact_evidence(conjugate):
    """Linear-Gaussian: the Laplace evidence is exact, and its search (the MAP refitted at each alpha) ends at the
    alpha maximising the exact evidence, with the exact posterior under it."""
    tuned = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", **{**FAST, "tune_prior_precision": True})
    alpha = tuned.record.prior_precision_multiplier
    assert tuned.record.prior_precision["layers.0.bias"] == pytest.approx(alpha / PRIOR_SCALE**2)
    assert tuned.record.evidence_converged and tuned.record.evidence_rounds >= 2
    best = minimize_scalar(lambda log_alpha: -exact_log_evidence(conjugate, PRIOR_SCALE**2 / math.exp(log_alpha)),
                           bracket=(-5.0, 5.0), tol=1e-12)
    # the search brackets log alpha to 0.1 and ends at the vertex of the parabola through the bracket, exact up to the
    # third-order term of the evidence in log alpha: 1e-2 leaves room for it
    assert alpha == pytest.approx(math.exp(best.x), rel=1e-2)
    assert tuned.record.log_marginal_likelihood == pytest.approx(exact_log_evidence(conjugate, PRIOR_SCALE**2 / alpha),
                                                                 rel=1e-8)
    phi = features(conjugate.x)
    precision = phi.T @ phi / NOISE**2 + alpha / PRIOR_SCALE**2 * torch.eye(3)
    mean = torch.linalg.solve(precision, phi.T @ conjugate.y / NOISE**2)
    torch.testing.assert_close(tuned.extras["guide"].mean, mean, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(tuned.extras["guide"].covariance(), torch.linalg.inv(precision), rtol=1e-8, atol=0)


def test_the_default_tunes_where_it_can(conjugate):
    default = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", **{k: v for k, v in FAST.items()
                                                                               if k != "tune_prior_precision"})
    assert default.record.tune_prior_precision is True and default.record.evidence_converged
    exact = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", hessian="exact", map_steps=100, num_samples=2,
                progress=False)  # the exact Hessian may be indefinite: no unique optimum to tune to
    assert exact.record.tune_prior_precision is False and exact.record.prior_precision_multiplier == 1.0


def test_linearised_predictive_is_the_exact_conjugate_predictive(conjugate, posterior):
    x_new = torch.tensor([[0.3, -1.2], [2.0, 0.5], [-3.0, 3.0]])
    phi = features(x_new)
    prediction = posterior.predict(x_new, predictive="linearized")
    torch.testing.assert_close(prediction.mean, phi @ conjugate.mean, rtol=1e-6, atol=0)
    variance = ((phi @ conjugate.cov) * phi).sum(-1)
    torch.testing.assert_close(prediction.epistemic_std, variance.sqrt(), rtol=1e-6, atol=0)
    torch.testing.assert_close(prediction.std, (variance + NOISE**2).sqrt(), rtol=1e-6, atol=0)
    assert prediction.draws.shape == (200, 3) and prediction.f.shape == (200, 3, 1)


def test_save_and_load_keep_the_linearised_predictive(posterior, tmp_path):
    x_new = torch.linspace(-2, 2, 7).reshape(-1, 1).expand(-1, 2).contiguous()
    before = posterior.predict(x_new, predictive="linearized", seed=5)
    loaded = Posterior.load(posterior.save(tmp_path / "laplace"))
    after = loaded.predict(x_new, predictive="linearized", seed=5)
    for field in ("mean", "std", "epistemic_std", "draws"):
        torch.testing.assert_close(getattr(after, field), getattr(before, field), rtol=1e-12, atol=0)


def test_methods_without_a_linearisation_and_unknown_predictives_are_refused(conjugate, posterior):
    svi = fit(conjugate.model, (conjugate.x, conjugate.y), "svi", steps=2, num_samples=5, progress=False)
    with pytest.raises(ValueError, match="method 'svi' has no linearised predictive; use predictive='mc'"):
        svi.predict(conjugate.x, predictive="linearized")
    with pytest.raises(ValueError, match=r"unknown predictive 'glm'; choose from \['mc', 'linearized'\]"):
        posterior.predict(conjugate.x, predictive="glm")


def test_same_seed_same_numbers_and_structures_share_the_map(conjugate):
    rng_state, parameters = torch.get_rng_state(), set(pyro.get_param_store().keys())
    first = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", seed=7, **FAST)
    assert torch.equal(torch.get_rng_state(), rng_state) and set(pyro.get_param_store().keys()) == parameters
    again = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", seed=7, **FAST)
    diag = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", seed=7, structure="diag", **FAST)
    for name, value in first.samples.items():
        assert torch.equal(value, again.samples[name])
    assert torch.equal(diag.extras["guide"].mean, first.extras["guide"].mean)
    # the diagonal structure keeps the precision's diagonal: variances 1 / Lambda_kk
    torch.testing.assert_close(diag.extras["guide"].covariance().diagonal(), conjugate.meanfield_var, rtol=1e-8, atol=0)


def exact_log_evidence_with_noise(conjugate, noise: float, prior_variance: float) -> float:
    phi = features(conjugate.x)
    cov = noise**2 * torch.eye(phi.shape[0]) + prior_variance * phi @ phi.T
    return torch.distributions.MultivariateNormal(torch.zeros(phi.shape[0]), cov).log_prob(conjugate.y).item()


@pytest.mark.long
@pytest.mark.parametrize("tune", [False, True])
def test_a_learned_noise_is_the_one_maximising_the_exact_evidence(conjugate, tune):
    """Linear-Gaussian with an unknown noise: the evidence is exact, p(y | sigma, alpha) = N(y; 0, sigma^2 I + s^2 /
    alpha Phi Phi^T). Untuned, the noise maximises it at alpha = 1; tuned, (sigma, alpha) maximise it jointly. The
    weights are then the conjugate posterior at that noise."""
    model = BayesianMLP(2, 1, hidden=(), prior=GaussianPrior(PRIOR_SCALE), likelihood={"name": "gaussian", "scale": None})
    posterior = fit(model, (conjugate.x, conjugate.y), "laplace", **{**FAST, "tune_prior_precision": tune})
    record, guide, phi = posterior.record, posterior.extras["guide"], features(conjugate.x)
    sigma, alpha = record.noise, record.prior_precision_multiplier
    assert record.evidence_converged and record.map_converged and (alpha == 1.0) is not tune

    def negative(log_values):  # log sigma, and log alpha where tuned
        return -exact_log_evidence_with_noise(conjugate, math.exp(log_values[0]),
                                              PRIOR_SCALE**2 / (math.exp(log_values[1]) if tune else 1.0))

    best = minimize(negative, [0.0, 0.0] if tune else [0.0], method="Nelder-Mead",
                    options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000})
    assert record.log_marginal_likelihood == pytest.approx(
        exact_log_evidence_with_noise(conjugate, sigma, PRIOR_SCALE**2 / alpha), rel=1e-10)
    # the search ends at a parabola's vertex in log(alpha sigma^2) (module notes of bnn.inference.curvature.evidence_search):
    # within 1e-3 relative of the maximum here, where the exact evidence is 1e-6 nats below its maximum
    assert sigma == pytest.approx(math.exp(best.x[0]), rel=1e-3)
    assert alpha == pytest.approx(math.exp(best.x[1]) if tune else 1.0, rel=1e-3)
    assert record.log_marginal_likelihood == pytest.approx(-best.fun, abs=1e-5)
    # the weights and precision are the conjugate posterior's at that noise and prior precision
    precision = phi.T @ phi / sigma**2 + alpha * torch.eye(3) / PRIOR_SCALE**2
    torch.testing.assert_close(guide.mean, torch.linalg.solve(precision, phi.T @ conjugate.y / sigma**2), rtol=1e-6, atol=0)
    torch.testing.assert_close(guide.covariance(), torch.linalg.inv(precision), rtol=1e-8, atol=0)
    assert torch.all(posterior.samples["sigma"] == sigma)


def test_binary_linearised_predictive_is_the_probit_approximation(conjugate):
    model = BayesianMLP(2, 1, hidden=(), prior=GaussianPrior(1.0), likelihood="bernoulli")
    labels = (conjugate.y > conjugate.y.median()).double()
    posterior = fit(model, (conjugate.x, labels), "laplace", **FAST)
    guide, phi = posterior.extras["guide"], features(conjugate.x[:5])
    mean, variance = phi @ guide.mean, ((phi @ guide.covariance()) * phi).sum(-1)
    prediction = posterior.predict(conjugate.x[:5], predictive="linearized")
    torch.testing.assert_close(prediction.probs, torch.sigmoid(mean / (1 + math.pi / 8 * variance).sqrt()), rtol=1e-8, atol=0)
    torch.testing.assert_close(prediction.std, (prediction.probs * (1 - prediction.probs)).sqrt(), rtol=1e-8, atol=0)


@pytest.mark.long
def test_multiclass_linearised_predictive_is_the_multiclass_probit(conjugate):
    model = BayesianMLP(2, 3, hidden=(), prior=GaussianPrior(1.0), likelihood="categorical")
    labels = torch.bucketize(conjugate.y, conjugate.y.quantile(torch.tensor([1 / 3, 2 / 3])))
    posterior = fit(model, (conjugate.x, labels), "laplace", **FAST)
    guide, x_new = posterior.extras["guide"], conjugate.x[:4]
    # f = x W^T + b is linear in the flat weights [W (3x2, row-major), b (3)]: f_k = a_k(x) . theta
    design = torch.stack([torch.cat([torch.kron(torch.eye(3)[k], x), torch.eye(3)[k]]) for x in x_new for k in range(3)])
    mean = (design @ guide.mean).reshape(4, 3)
    variance = ((design @ guide.covariance()) * design).sum(-1).reshape(4, 3)
    probs = torch.softmax(mean / (1 + math.pi / 8 * variance).sqrt(), dim=-1)
    prediction = posterior.predict(x_new, predictive="linearized")
    torch.testing.assert_close(prediction.probs, probs, rtol=1e-8, atol=0)


@pytest.mark.long
def test_last_layer_works_with_a_laplace_prior_below_a_gaussian_last_layer(conjugate):
    model = BayesianMLP(2, 1, hidden=(3,), prior={"*": LaplacePrior(1.0), "layers.1": GaussianPrior(1.0)},
                        likelihood={"name": "gaussian", "scale": NOISE})
    with pytest.raises(ValueError, match="LaplacePrior on 'layers.0.weight'"):
        fit(model, (conjugate.x, conjugate.y), "laplace", **FAST)
    posterior = fit(model, (conjugate.x, conjugate.y), "laplace", structure="last-layer", **FAST)
    assert posterior.record.num_weights_covered == 4
    first_layer = posterior.samples["layers.0.weight"].reshape(200, -1)
    assert torch.all(first_layer == first_layer[0])


def test_an_indefinite_exact_hessian_is_refused_clearly_and_the_ggn_is_not(monkeypatch):
    # theta = 0 is a stationary point of a tanh net's log joint for centred targets, and a
    # saddle: the hidden and output weights interact through the data.
    model = BayesianMLP(1, 1, hidden=(4,), prior=GaussianPrior(1.0), likelihood={"name": "gaussian", "scale": 0.1})
    x = torch.linspace(-1, 1, 30).unsqueeze(-1)
    y = x[:, 0] - x[:, 0].mean()
    saddle = MapEstimate(torch.zeros(13, dtype=torch.float64), {}, 0.0, 0.0, 0.0, 0.0, "levenberg-marquardt", 0, True)
    monkeypatch.setattr(laplace_module, "find_map", lambda *args, **kwargs: saddle)
    with pytest.raises(ValueError) as error:
        fit(model, (x, y), "laplace", hessian="exact", progress=False)
    message = str(error.value)
    assert "not positive definite" in message and "use hessian='ggn'" in message and "eigenvalues <= 0" in message
    assert isinstance(fit(model, (x, y), "laplace", hessian="ggn", progress=False), Posterior)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(hessian="exact", structure="diag"), "hessian='exact' with structure='diag' is not offered"),
        (dict(hessian="hesse"), r"unknown hessian 'hesse'; choose from \['ggn', 'exact'\]"),
        (dict(structure="blocks"),
         r"unknown structure 'blocks'; choose from \['full', 'diag', 'last-layer', 'kron', 'subnetwork'\]"),
        (dict(tune_prior_precision=True, hessian="exact"), "tune_prior_precision needs a positive semi-definite"),
        (dict(map_steps=0), "map_steps must be a positive integer"),
        (dict(max_memory_gib=1e-9), "structure 'full' over 3 weights needs about"),
        (dict(steps=10), r"method 'laplace' takes no option\(s\) \['steps'\]"),
    ],
)
def test_bad_options_are_refused_before_any_work(conjugate, options, message, monkeypatch):
    monkeypatch.setattr(laplace_module, "find_map", lambda *args, **kwargs: pytest.fail("work started"))
    with pytest.raises(ValueError, match=message):
        fit(conjugate.model, (conjugate.x, conjugate.y), "laplace", progress=False, **options)


def test_a_prior_with_no_curvature_anywhere_is_refused_before_the_map(conjugate, monkeypatch):
    model = BayesianMLP(2, 1, hidden=(), prior=LaplacePrior(1.0), likelihood={"name": "gaussian", "scale": NOISE})
    monkeypatch.setattr(laplace_module, "find_map", lambda *args, **kwargs: pytest.fail("work started"))
    with pytest.raises(ValueError, match="Laplace prior never is"):
        fit(model, (conjugate.x, conjugate.y), "laplace", progress=False)
    with pytest.raises(ValueError, match=r"tune_prior_precision scales a Gaussian prior's precision.*\['LaplacePrior'\]"):
        fit(model, (conjugate.x, conjugate.y), "laplace", tune_prior_precision=True, progress=False)


@pytest.mark.long
def test_command_line_writes_the_three_files_and_refuses_wrong_combinations(float32, tmp_path, capsys):
    out = tmp_path / "laplace"
    common = ["fit", "--dataset", "toy1d", "--hidden", "4", "--noise", "0.1", "--quiet", "--out"]
    assert main([*common, str(out), "--method", "laplace", "--hessian", "ggn", "--structure", "diag",
                 "--map-steps", "100", "--num-samples", "100"]) == 0
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "posterior.nc", "fit.json", "predictive.png"}
    assert "test_rmse" in capsys.readouterr().out
    loaded = Posterior.load(out)
    assert loaded.record.options.structure == "diag" and loaded.linearization.guide.mean.dtype == torch.float32
    assert np.isfinite(loaded.predict(torch.zeros(2, 1), predictive="linearized").std.numpy()).all()
    for wrong, message in [
        (["--method", "svi", "--hessian", "ggn"], "method 'svi' takes no option(s) ['hessian']"),
        (["--method", "laplace", "--hessian", "exact", "--structure", "diag"], "structure='diag' is not offered"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main([*common, str(tmp_path / "wrong"), *wrong])
        assert exit_.value.code == 2 and message in capsys.readouterr().err



def test_an_unconverged_map_is_reported_loudly(conjugate):
    with pytest.warns(RuntimeWarning, match=r"the MAP polish \(levenberg-marquardt\) stopped after .* posterior standard "
                                            r"deviations from the mode \(Newton decrement > map_tolerance=1e-30"):
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "laplace",
                        **{**FAST, "map_tolerance": 1e-30, "map_max_iter": 1})
    assert posterior.record.map_converged is False


@pytest.mark.long
def test_log_likelihood_is_the_linearised_networks_and_mc_keeps_the_network(conjugate):
    """LOO/WAIC read the pointwise log-likelihood of the predictive Laplace reports (the GLM):
    at every draw, f(x; theta_MAP) + J (theta - theta_MAP), checked against torch.func.jvp."""
    model = BayesianMLP(2, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": NOISE})
    posterior = fit(model, (conjugate.x, conjugate.y), "laplace", seed=0, **{**FAST, "num_samples": 5})
    theta = join_sites(model.sites, {name: value[0, 0] for name, value in posterior.samples.items()})
    theta_map = posterior.linearization.guide.mean
    draws = join_sites(model.sites, {name: value[0] for name, value in posterior.samples.items()})

    def network(flat):
        return model.forward(conjugate.x, split_flat(model.sites, flat))[:, 0]

    expected = []
    for draw in draws:
        at_map, change = torch.func.jvp(network, (theta_map,), (draw - theta_map,))
        expected.append(torch.distributions.Normal(at_map + change, NOISE).log_prob(conjugate.y))
    log_lik = torch.as_tensor(posterior.to_inference_data().log_likelihood["obs"].values[0])
    torch.testing.assert_close(log_lik, torch.stack(expected), rtol=1e-10, atol=1e-10)
    networks = torch.distributions.Normal(network(theta), NOISE).log_prob(conjugate.y)
    torch.testing.assert_close(posterior.pointwise_log_likelihood(conjugate.x, conjugate.y, "mc")[0, 0], networks)
    assert not torch.allclose(networks, torch.stack(expected)[0])  # the net is not linear in its weights


def test_the_command_line_takes_the_options_the_map_warning_names():
    from bnn.cli.arguments import fit_options
    from bnn.cli.main import build_parser
    from bnn.experiments.comparison.run import method_specs, options_per_method

    arguments = build_parser().parse_args(["compare", "--map-lr", "0.05", "--map-tolerance", "0.5",
                                                      "--map-max-iter", "7", "--no-tune-prior-precision"])
    options = fit_options(arguments)
    svi, laplace, map_ = options_per_method(method_specs("svi,laplace,map"), options)
    assert (laplace["map_lr"], laplace["map_tolerance"], laplace["map_max_iter"]) == (0.05, 0.5, 7)
    assert laplace["tune_prior_precision"] is False and map_["map_max_iter"] == 7 and "map_lr" not in svi
    assert "tune_prior_precision" not in fit_options(build_parser().parse_args(["compare"]))


def test_an_evidence_without_a_maximum_in_range_is_reported_loudly(conjugate):
    """Targets far smaller than the model's fixed noise: the exact evidence rises as the prior variance s^2 / alpha
    falls to 0 (its slope there, ||Phi^T y||^2 / sigma^4 - tr(Phi^T Phi) / sigma^2, is negative), so no alpha is a
    maximum and the search runs to its last step."""
    y = 0.05 * torch.randn(conjugate.x.shape[0], generator=torch.Generator().manual_seed(3))
    phi = features(conjugate.x)
    assert float((phi.T @ y).pow(2).sum()) / NOISE**4 < float(phi.pow(2).sum()) / NOISE**2
    with pytest.warns(RuntimeWarning, match="the Laplace evidence rose all the way to the end of the search"):
        posterior = fit(conjugate.model, (conjugate.x, y), "laplace", **{**FAST, "tune_prior_precision": True})
    assert posterior.record.evidence_converged is False
    assert "the evidence search found no maximum" in posterior.record.problems()[0]


def test_the_bridge_link_predicts_through_the_laplace_bridge_and_keeps_it_when_loaded(tmp_path):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()  # three classes
    model = BayesianMLP(2, 3, hidden=(4,), likelihood="categorical")
    posterior = fit(model, (x, y), "laplace", link_approx="bridge", map_steps=200, num_samples=4, progress=False)
    mean, covariance = posterior.linearization.output_moments(posterior.model, x[:5])
    expected = laplace_bridge(mean, covariance)
    torch.testing.assert_close(posterior.predict(x[:5]).probs, expected)
    assert not torch.allclose(expected, torch.softmax(mean / (1 + math.pi / 8 * covariance.diagonal(0, -2, -1)).sqrt(), -1))
    posterior.save(tmp_path / "fit")
    torch.testing.assert_close(Posterior.load(tmp_path / "fit").predict(x[:5]).probs, expected)
    with pytest.raises(ValueError, match="link_approx='bridge' maps the logits of two or more classes; this network's "
                                         "likelihood is binary: use link_approx='probit'"):
        fit(BayesianMLP(2, 1, hidden=(4,), likelihood="bernoulli"), (x, (y > 0).float()), "laplace", link_approx="bridge",
            progress=False)


def test_the_predictives_cholesky_jitters_only_the_covariances_that_rounding_left_below_zero():
    from bnn.inference.laplace.linearized import psd_cholesky

    generator = torch.Generator().manual_seed(0)
    root = torch.randn(3, 10, 4, generator=generator)
    cov = root @ root.transpose(-1, -2)  # rank 4 of 10: singular
    cov[1] += torch.eye(10)  # positive definite
    cov[2] -= 1e-7 * torch.eye(10)  # an eigenvalue below zero, as rounding leaves one
    assert (torch.linalg.cholesky_ex(cov).info > 0).tolist() == [True, False, True]
    factor = psd_cholesky(cov)
    torch.testing.assert_close(factor[1], torch.linalg.cholesky(cov[1]), rtol=0, atol=0)  # left exactly as it is
    for index in (0, 2):  # jittered by at most 1e-4 of the mean variance
        gap = (factor[index] @ factor[index].T - cov[index]).abs().max()
        assert gap <= 1e-4 * cov[index].diagonal().mean() * 1.01
    with pytest.raises(ValueError, match="not positive semi-definite even with a jitter"):
        psd_cholesky(-torch.eye(3).expand(2, 3, 3).clone())
