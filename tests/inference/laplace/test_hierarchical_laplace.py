"""The Laplace fit of networks with ``layer-scale`` and ``ard`` priors: their scales at the type-II maximum
(:mod:`bnn.inference.laplace.type2_scales`).

A linear model with a Gaussian likelihood is linear-Gaussian given its prior precisions, so its Laplace evidence is
the exact marginal likelihood :math:`\\mathcal{N}(y; 0, \\sigma^2 I + \\Phi\\,\\mathrm{diag}(1/\\lambda)\\Phi^\\top)`
(:math:`\\Phi = [X, 1]`, one precision per ARD column and one for the bias): the type-II scales must be its maximum,
found here directly by Newton's method on the closed form.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.laplace import type2_scales
from bnn.models import ARDPrior, BayesianMLP, HorseshoePrior, LayerScalePrior
from scipy.optimize import minimize

from bnn.cli.main import main
from bnn.runtime.workers import one_torch_thread

N = 30
X = torch.randn(N, 3, generator=torch.Generator().manual_seed(4))  # float32, as fit takes data; the closed form and
NOISE = 0.4  # the Laplace fit both work in float64 from these values
Y = X @ torch.tensor([1.0, -0.7, 0.4]) + 0.5 + NOISE * torch.randn(N, generator=torch.Generator().manual_seed(5))
FIXED_NOISE = {"name": "gaussian", "scale": NOISE}
LEARNED_NOISE = {"name": "gaussian", "scale": None}
EXACT = dict(map_steps=200, map_tolerance=1e-8, num_samples=20, structure="full", progress=False)
"""The MAP polished to 1e-8 posterior standard deviations: the Laplace evidence there is the closed form's to
:math:`\\delta^2/2 = 5 \\cdot 10^{-17}` nats."""
QUICK = dict(map_steps=50, num_samples=20, seed=0, progress=False)
GRADIENT_TOLERANCE = 1e-10


def linear_ard(likelihood) -> BayesianMLP:
    return BayesianMLP(3, 1, hidden=(), prior={"layers.0": ARDPrior(1.0)}, likelihood=likelihood)


def exact_log_evidence(log_precisions: torch.Tensor, log_noise: torch.Tensor, x=X, y=Y) -> torch.Tensor:
    """The closed-form log marginal likelihood, in float64; ``log_precisions`` holds the columns', then the bias's."""
    x, y = x.double(), y.double()
    phi = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)
    covariance = (2 * log_noise).exp() * torch.eye(x.shape[0], dtype=x.dtype) + (phi * (-log_precisions).exp()) @ phi.T
    return torch.distributions.MultivariateNormal(torch.zeros_like(y), covariance).log_prob(y)


def exact_maximum(learned: bool) -> tuple[np.ndarray, float]:
    """The log precisions (and log noise, when learned) maximising the closed form: Newton's method in a trust region
    with torch's gradient and Hessian, to a gradient norm of :data:`GRADIENT_TOLERANCE`."""

    def negative(values: np.ndarray) -> torch.Tensor:
        point = torch.as_tensor(values, dtype=torch.float64)
        log_noise = point[4] if learned else torch.tensor(math.log(NOISE), dtype=torch.float64)
        return -exact_log_evidence(point[:4], log_noise)

    def gradient(values: np.ndarray) -> np.ndarray:
        return torch.autograd.functional.jacobian(negative, torch.as_tensor(values, dtype=torch.float64)).numpy()

    def hessian(values: np.ndarray) -> np.ndarray:
        return torch.autograd.functional.hessian(negative, torch.as_tensor(values, dtype=torch.float64)).numpy()

    with one_torch_thread():  # a 30 x 30 problem: more threads only contend for the cores
        result = minimize(lambda values: negative(values).item(), np.zeros(5 if learned else 4), jac=gradient,
                          hess=hessian, method="trust-exact", options={"gtol": GRADIENT_TOLERANCE})
    assert result.success, result.message
    return result.x, -result.fun


def fitted_log_precisions(record) -> np.ndarray:
    scales = [*record.hierarchical_scales["layers.0.weight"], record.hierarchical_scales["layers.0.bias"]]
    return -2 * np.log(scales)


@pytest.mark.parametrize("likelihood", [FIXED_NOISE, LEARNED_NOISE], ids=["fixed-noise", "learned-noise"])
def test_the_scales_of_a_linear_model_maximise_its_exact_marginal_likelihood(likelihood, monkeypatch):
    """The fixed point is settled to 1e-10 in each log precision (and the log noise) and Newton's method to a gradient
    of 1e-10, on an evidence whose curvature in those coordinates is of order one: both are within about 1e-9 of the
    maximum, checked to 1e-6."""
    monkeypatch.setattr(type2_scales, "TOLERANCE", 1e-10)
    monkeypatch.setattr(type2_scales, "EVIDENCE_TOLERANCE", 0.0)
    learned = likelihood is LEARNED_NOISE
    posterior = fit(linear_ard(likelihood), (X, Y), "laplace", seed=0, **EXACT)
    record = posterior.record
    assert record.type2_converged and record.hierarchical_scales_method == type2_scales.DESCRIPTION
    maximum, best = exact_maximum(learned)
    fitted = fitted_log_precisions(record)
    np.testing.assert_allclose(fitted, maximum[:4], atol=1e-6)
    log_noise = math.log(record.noise) if learned else math.log(NOISE)
    if learned:
        assert log_noise == pytest.approx(maximum[4], abs=1e-6)
    # the Laplace evidence is the exact one there, and the maximum
    at_fit = exact_log_evidence(torch.tensor(fitted), torch.tensor(log_noise, dtype=torch.float64)).item()
    assert record.log_marginal_likelihood == pytest.approx(at_fit, abs=1e-8)
    assert at_fit == pytest.approx(best, abs=1e-9)


def test_ard_shrinks_an_irrelevant_input_away():
    """y depends on the first input alone: the evidence leaves its column near its coefficient's size and drives the
    second's precision up until its weight vanishes (here to the floor: no finite maximum at this seed)."""
    x = torch.randn(60, 2, generator=torch.Generator().manual_seed(6))
    y = 2.0 * x[:, 0] + NOISE * torch.randn(60, generator=torch.Generator().manual_seed(7))
    model = BayesianMLP(2, 1, hidden=(), prior={"layers.0": ARDPrior(1.0)}, likelihood=FIXED_NOISE)
    posterior = fit(model, (x, y), "laplace", **QUICK)
    relevant, irrelevant = posterior.record.hierarchical_scales["layers.0.weight"]
    assert 1.5 < relevant < 2.5
    assert irrelevant == pytest.approx(1.0 / type2_scales.SCALE_RANGE)
    weight = posterior.samples["layers.0.weight"][0, :, 0]
    assert weight[:, 1].abs().max() < 1e-3 < weight[:, 0].abs().min()


def small_net() -> BayesianMLP:
    return BayesianMLP(3, 1, hidden=(4,), prior={"*": LayerScalePrior(0.5), "layers.0": ARDPrior(2.0)},
                       likelihood=LEARNED_NOISE)


@pytest.mark.long
def test_a_network_draws_predicts_and_saves_with_its_type2_scales(tmp_path):
    posterior = fit(small_net(), (X, Y), "laplace", **QUICK)
    record = posterior.record
    assert set(record.hierarchical_scales) == {"layers.0.weight", "layers.0.bias", "layers.1"}
    assert len(record.hierarchical_scales["layers.0.weight"]) == 3 and record.type2_rounds >= 1
    # the scale sites are constants of the draws and of the ArviZ data, matching the group scales
    tau, relevance = posterior.samples["layers.0.scale"], posterior.samples["layers.0.relevance"]
    assert tau.shape == (1, 20) and relevance.shape == (1, 20, 3) and (tau == tau[0, 0]).all()
    np.testing.assert_allclose((tau[0, 0] * relevance[0, 0]).numpy(), record.hierarchical_scales["layers.0.weight"],
                               rtol=1e-6)
    assert tau[0, 0].item() == pytest.approx(record.hierarchical_scales["layers.0.bias"], rel=1e-6)
    assert posterior.samples["layers.1.scale"][0, 0].item() == pytest.approx(record.hierarchical_scales["layers.1"],
                                                                            rel=1e-6)
    assert torch.isfinite(posterior.predict(X, seed=0).mean).all()
    idata = posterior.to_inference_data()
    assert {"layers.0.scale", "layers.0.relevance", "layers.1.scale"} <= set(idata.constant_data.data_vars)
    posterior.save(tmp_path / "run")
    loaded = Posterior.load(tmp_path / "run")
    assert loaded.record.hierarchical_scales == record.hierarchical_scales
    np.testing.assert_allclose(loaded.constants["layers.0.relevance"], posterior.constants["layers.0.relevance"])
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, posterior.predict(X, seed=0).mean)


def test_the_horseshoe_is_refused_naming_the_methods_that_fit_it(monkeypatch):
    monkeypatch.setattr("bnn.inference.core.method.check_memory", lambda *args: pytest.fail("work started"))
    model = BayesianMLP(3, 1, hidden=(4,), prior={"*": LayerScalePrior(), "layers.0": HorseshoePrior()})
    with pytest.raises(ValueError, match=r"method 'laplace' cannot fit the hierarchical prior\(s\) 'horseshoe' "
                                         r"\(layers.0\) of BayesianMLP: .*relevance vector machine's degenerate case.*; "
                                         "use svi with guide='autonormal' or 'meanfield', or nuts with init='prior'"):
        fit(model, (X, Y), "laplace")


@pytest.mark.parametrize("options, message", [
    ({"hessian": "exact"}, "need a positive semi-definite curvature .*; use hessian='ggn'"),
    ({"structure": "kron"}, r"structure='kron' adds one Gaussian prior precision per weight and bias site .*"
                            r"ARDPrior on 'layers.0.bias'.*: use a Gaussian prior, or structure 'full' or 'diag'"),
    ({"structure": "last-layer"}, r"structure='last-layer' leaves out the layers \['layers.0'\], .*; use "
                                  "structure='full' or 'diag'"),
    ({"structure": "subnetwork"}, "structure='subnetwork' holds the weights outside it at their MAP, .*; use "
                                  "structure='full' or 'diag'"),
    ({"tune_prior_precision": True}, "a precision per group instead .*: leave tune_prior_precision unset"),
])
def test_what_the_type2_scales_cannot_serve_is_refused_before_any_work(options, message, monkeypatch):
    monkeypatch.setattr(type2_scales, "find_map", lambda *args, **kwargs: pytest.fail("work started"))
    with pytest.raises(ValueError, match=message):
        fit(small_net(), (X, Y), "laplace", progress=False, **options)


@pytest.mark.parametrize("structure, model, group", [
    ("diag", linear_ard(FIXED_NOISE), "layers.0.bias"),
    ("last-layer", BayesianMLP(3, 1, hidden=(4,), prior={"*": "gaussian", "layers.1": "layer-scale"},
                               likelihood=FIXED_NOISE), "layers.1"),
])
def test_the_diagonal_and_last_layer_structures_fit_the_scales_they_cover(structure, model, group):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 50 Adam steps: the MAP's own check is tested elsewhere
        posterior = fit(model, (X, Y), "laplace", structure=structure, **QUICK)
    record = posterior.record
    assert record.structure == structure and record.type2_converged
    assert 0 < record.hierarchical_scales[group] < type2_scales.SCALE_RANGE
    assert posterior.extras["guide"].is_diagonal == (structure == "diag")


@pytest.mark.long
def test_the_command_line_fits_ard_with_laplace(tmp_path):
    out = tmp_path / "run"
    assert main(["fit", "--dataset", "toy1d", "--hidden", "4", "--method", "laplace", "--prior", "ard", "--map-steps",
                 "50", "--num-samples", "20", "--quiet", "--out", str(out)]) == 0
    record = Posterior.load(out).record
    assert set(record.hierarchical_scales) == {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}
