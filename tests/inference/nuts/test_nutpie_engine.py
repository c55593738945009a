"""The nutpie engine of ``fit(..., method="nuts")``: same output as the Pyro engine, options, seeds, processes.

Exactness against the conjugate posterior, for both engines, lives in test_exactness.py.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from pathlib import Path

import arviz as az
import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from bnn.inference import fit
from bnn.inference.nuts import DEFAULT_ENGINE, Engine
from bnn.inference.nuts.engines.nutpie import ZERO_GRADIENT_NUDGE, nudged_start
from bnn.inference.nuts.potential import Backend, FlatPotential
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior, Prior

from tests.support.conjugate import NOISE, NUM_FEATURES, PRIOR_SCALE

pytestmark = pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # short runs


def quick(conjugate, model=None, **options):
    settings = dict(num_warmup=30, num_samples=20, num_chains=2, chain_method="sequential", progress=False,
                    jit_compile=False, engine="nutpie", init="prior")  # from the prior: no MAP fit per chain
    return fit(model or conjugate.model, (conjugate.x, conjugate.y), "nuts", **{**settings, **options})


def test_nutpie_is_the_default_engine():
    assert DEFAULT_ENGINE is Engine.NUTPIE


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(engine="stan"), r"unknown engine 'stan'; choose from \['nutpie', 'pyro'\]"),
        (dict(dense_mass=True), "the nutpie engine has no dense mass matrix; pass engine='pyro'"),
        (dict(num_warmup=0), "the nutpie engine needs num_warmup >= 1"),
    ],
)
def test_bad_engine_options_raise(conjugate, options, message):
    with pytest.raises(ValueError, match=message):
        quick(conjugate, **options)


@pytest.mark.long
def test_both_engines_give_the_same_groups_and_statistics(conjugate):
    runs = {engine: quick(conjugate, engine=engine, max_tree_depth=3) for engine in ("nutpie", "pyro")}
    groups = {engine: set(run.to_inference_data().groups()) for engine, run in runs.items()}
    assert groups["nutpie"] == groups["pyro"]
    nutpie, pyro = runs["nutpie"], runs["pyro"]
    assert nutpie.record.options.engine == "nutpie" and pyro.record.options.engine == "pyro"
    assert set(nutpie.sample_stats) == set(pyro.sample_stats)
    for name, value in pyro.sample_stats.items():
        assert nutpie.sample_stats[name].shape == value.shape == (2, 20), name
        assert nutpie.sample_stats[name].dtype.kind == value.dtype.kind, name
    for name, value in pyro.samples.items():
        assert nutpie.samples[name].shape == value.shape and nutpie.samples[name].dtype == value.dtype
    stats = nutpie.sample_stats
    assert np.all((stats["n_steps"] >= 1) & (stats["n_steps"] <= 2**3 - 1))  # max_tree_depth is respected
    np.testing.assert_array_equal(stats["tree_depth"], np.floor(np.log2(stats["n_steps"])) + 1)
    assert np.all((stats["acceptance_rate"] >= 0) & (stats["acceptance_rate"] <= 1))
    assert np.all(stats["step_size"] > 0) and np.all(stats["step_size"] == stats["step_size"][:, :1])
    for run in runs.values():  # gradients count warmup too: at least one leapfrog step per warmup iteration
        per_chain, kept_steps = run.record.chain_gradients, run.sample_stats["n_steps"].sum(axis=1)
        assert run.record.gradient_evaluations == sum(per_chain)
        assert np.all(np.array(per_chain) >= kept_steps + 30) and np.all(np.array(per_chain) <= kept_steps + 30 * 7)


def test_same_seed_same_draws_and_another_seed_others(conjugate):
    """In sequence; the same draws in worker processes are tested by test_nuts.py's
    test_same_seed_same_draws_in_processes_and_in_sequence, on this engine (the default) too."""
    runs = {name: quick(conjugate, seed=seed) for name, seed in [("a", 3), ("b", 3), ("other seed", 4)]}
    reference = runs["a"]
    for site, value in reference.samples.items():
        assert torch.equal(runs["b"].samples[site], value), site
    for stat, value in reference.sample_stats.items():
        np.testing.assert_array_equal(runs["b"].sample_stats[stat], value)
    assert not torch.equal(runs["other seed"].samples["layers.0.bias"], reference.samples["layers.0.bias"])


def test_the_compiled_kernel_gives_the_eager_potentials_draws(conjugate):
    """On the linear model the two potentials differ by rounding only, too little to change a trajectory: the same
    tree sizes and the same draws to rounding (with a hidden layer, the chaos of the trajectories amplifies it)."""
    assert FlatPotential(conjugate.model, conjugate.x, conjugate.y).backend is Backend.NUMBA
    compiled, eager = quick(conjugate, jit_compile=True), quick(conjugate)
    for site, value in eager.samples.items():
        torch.testing.assert_close(compiled.samples[site], value, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(compiled.sample_stats["n_steps"], eager.sample_stats["n_steps"])


@pytest.mark.long
def test_learned_noise_comes_back_positive_and_near_the_truth():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(200, 1, generator=generator, dtype=torch.float64)
    y = 0.5 * x[:, 0] + 0.3 * torch.randn(200, generator=generator, dtype=torch.float64)
    model = BayesianMLP(1, 1, hidden=(), likelihood={"name": "gaussian", "scale": None})
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        posterior = fit(model, (x, y), "nuts", num_warmup=200, num_samples=200, num_chains=1, jit_compile=False,
                        engine="nutpie", progress=False, seed=0)
    finally:
        torch.set_default_dtype(previous)
    sigma = posterior.samples["sigma"]
    assert sigma.shape == (1, 200) and torch.all(sigma > 0)
    # the posterior of sigma from 200 points has sd about 0.3 / sqrt(400) = 0.015; 0.3 lies within 4 sd
    assert abs(sigma.mean().item() - 0.3) < 0.06


def test_a_start_whose_gradient_has_exact_zeros_is_nudged_so_nutpie_can_begin(conjugate):
    """A ReLU unit inactive on every input, its weights at exactly 0 (where a polished ReLU MAP can leave them), has
    an exactly zero gradient in those weights: nutpie refuses such a start ("invalid initial point")."""
    model = BayesianMLP(NUM_FEATURES, 1, hidden=(2,), activation="relu", prior=GaussianPrior(PRIOR_SCALE),
                        likelihood=GaussianLikelihood(scale=NOISE))
    dead_first = {"layers.0.weight": torch.tensor([[0.0, 0.0], [0.5, -0.3]]), "layers.0.bias": torch.tensor([-100.0, 0.1]),
                  "layers.1.weight": torch.tensor([[0.0, 1.0]]), "layers.1.bias": torch.tensor([0.2])}
    potential = FlatPotential(model, conjugate.x, conjugate.y)
    start = potential.flatten(dead_first).numpy()
    zero = potential.value_and_grad(start)[1] == 0
    assert zero.sum() == 3  # the dead unit's two input weights and its output weight
    moved = nudged_start(potential.value_and_grad, start)
    assert np.all(potential.value_and_grad(moved)[1] != 0)
    np.testing.assert_array_equal(moved[~zero], start[~zero])
    np.testing.assert_array_equal(moved[zero], start[zero] + ZERO_GRADIENT_NUDGE)
    np.testing.assert_array_equal(nudged_start(potential.value_and_grad, moved), moved)  # nothing to move: unchanged
    posterior = quick(conjugate, model=model, init=dead_first, num_chains=1, max_tree_depth=3)
    assert posterior.record.failed_chains is None and posterior.samples["layers.1.bias"].shape[:2] == (1, 20)


SHIFT_SCALE = 2.0


class ShiftedMLP(BayesianMLP):
    """A program the model object does not describe: a shift ``c ~ N(0, 2^2)`` added to the output at every other
    point (``g_i = i mod 2``)."""

    def __call__(self, x, y=None, num_data=None):
        c = pyro.sample("c", dist.Normal(0.0, SHIFT_SCALE))
        values = {site.name: pyro.sample(site.name, self.prior[site.name].distribution(site).to_event(len(site.shape)))
                  for site in self.sites}
        f = self.forward(x, self.squeeze_plate_slot(values))[..., 0] + c * (torch.arange(x.shape[0]) % 2)
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Normal(f, NOISE), obs=y)


@pytest.fixture(scope="module")
def shifted(conjugate):
    """The conjugate problem with the shift: beta = [w, b, c] | y ~ N(m, S), Phi = [x, 1, g], prior precision
    diag(1/s^2, 1/s^2, 1/s^2, 1/2^2)."""
    x, y = conjugate.x, conjugate.y
    phi = torch.cat([x, torch.ones(len(x), 1), (torch.arange(len(x)) % 2)[:, None]], dim=1)
    prior_precision = torch.tensor([PRIOR_SCALE**-2] * (x.shape[1] + 1) + [SHIFT_SCALE**-2])
    cov = torch.linalg.inv(phi.T @ phi / NOISE**2 + torch.diag(prior_precision))
    mean = cov @ phi.T @ y / NOISE**2
    return ShiftedMLP.from_config(conjugate.model.config()), mean, cov


@pytest.mark.long
@pytest.mark.parametrize("engine", ["nutpie", pytest.param("pyro", marks=pytest.mark.slow)])  # make test: the default
def test_a_program_the_model_does_not_describe_is_sampled_through_pyros_potential(conjugate, shifted, engine):
    model, mean, cov = shifted
    # 2 x 100 draws: the tolerance below follows from their ESS (at seeds 1-5 the means were within 1.7 standard errors)
    posterior = quick(conjugate, model=model, engine=engine, num_warmup=100, num_samples=100, seed=1)
    assert posterior.record.potential == "trace"
    if engine == "nutpie":  # the flat potential would drop `c` and the bias would absorb the shift
        assert "'c'" in posterior.record.potential_reason
    draws = {"c": posterior.extras["other_sites"]["c"], "bias": posterior.samples["layers.0.bias"][..., 0]}
    assert draws["c"].shape == (2, 100)
    for index, name in [(-1, "c"), (-2, "bias")]:  # both within 4 Monte Carlo standard errors of the exact mean
        value = draws[name].numpy()
        standard_error = cov[index, index].sqrt().item() / np.sqrt(az.ess(value))
        assert abs(value.mean() - mean[index].item()) < 4 * standard_error, (name, value.mean(), mean[index])


@pytest.mark.long
def test_the_collections_models_keep_the_fast_flat_potential(conjugate):
    assert quick(conjugate).record.potential == "flat" and quick(conjugate).record.potential_reason is None
    assert quick(conjugate, engine="pyro").record.potential == "trace"  # Pyro's NUTS reads the trace itself


def _openmp_threads_function():
    """``omp_get_max_threads`` of the OpenMP runtime torch computes with, for the calling thread (``None`` where
    torch ships no libgomp). Unlike ``torch.get_num_threads()``, calling it does not set the thread's count."""
    libraries = sorted((Path(torch.__file__).parent / "lib").glob("libgomp*.so*"))
    return ctypes.CDLL(str(libraries[0])).omp_get_max_threads if libraries else None


OPENMP_THREADS = _openmp_threads_function()


@dataclass(frozen=True)
class RecordsTheCallingThread(Prior):
    """N(0, 1), recording ``(thread, OpenMP threads)`` each time the (eager) potential asks for it."""

    calls: list = field(default_factory=list, compare=False)

    def distribution(self, site):
        self.calls.append((threading.get_ident(), OPENMP_THREADS()))
        return dist.Normal(0.0, 1.0).expand(site.shape)


def _threads_of_a_new_thread() -> int:
    seen = []
    thread = threading.Thread(target=lambda: seen.append(OPENMP_THREADS()))
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.skipif(OPENMP_THREADS is None, reason="torch has no libgomp here to ask")
def test_the_potential_computes_on_one_thread_in_nutpies_own_thread(conjugate):
    """torch's thread count is per thread: nutpie's thread would compute with one OpenMP thread per core (ten
    times slower on a small net) unless the callback sets it there."""
    if _threads_of_a_new_thread() == 1:
        pytest.skip("a new thread computes on one OpenMP thread here anyway (one core, or OMP_NUM_THREADS=1)")
    model = BayesianMLP(conjugate.x.shape[1], 1, hidden=(), prior=RecordsTheCallingThread(),
                        likelihood={"name": "gaussian", "scale": NOISE})
    posterior = quick(conjugate, model, num_chains=1, num_warmup=10, num_samples=5)
    assert posterior.record.potential == "flat" and posterior.record.chain_method == "sequential"
    calls = posterior.model.prior["layers.0.weight"].calls  # the fit's copy of the model ran the potential
    in_nutpie = [threads for thread, threads in calls if thread != threading.main_thread().ident]
    assert len(in_nutpie) >= posterior.record.gradient_evaluations and set(in_nutpie) == {1}
