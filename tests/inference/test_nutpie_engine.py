"""The nutpie engine of ``fit(..., method="nuts")``: same output as the Pyro engine, options, seeds, processes.

Exactness against the conjugate posterior, for both engines, lives in test_exactness.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inference import fit
from inference.nuts import DEFAULT_ENGINE, Engine
from models import BayesianMLP

pytestmark = pytest.mark.filterwarnings("ignore::inference.nuts.ConvergenceWarning")  # short runs


def quick(conjugate, **options):
    settings = dict(num_warmup=30, num_samples=20, num_chains=2, chain_method="sequential", progress=False,
                    jit_compile=False, engine="nutpie")
    return fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", **{**settings, **options})


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


def test_both_engines_give_the_same_groups_and_statistics(conjugate):
    runs = {engine: quick(conjugate, engine=engine, max_tree_depth=3) for engine in ("nutpie", "pyro")}
    groups = {engine: set(run.to_inference_data().groups()) for engine, run in runs.items()}
    assert groups["nutpie"] == groups["pyro"]
    nutpie, pyro = runs["nutpie"], runs["pyro"]
    assert nutpie.info["engine"] == "nutpie" and pyro.info["engine"] == "pyro"
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
        per_chain, kept_steps = run.info["chain_gradients"], run.sample_stats["n_steps"].sum(axis=1)
        assert run.info["gradient_evaluations"] == sum(per_chain)
        assert np.all(np.array(per_chain) >= kept_steps + 30) and np.all(np.array(per_chain) <= kept_steps + 30 * 7)


def test_same_seed_same_draws_in_processes_and_in_sequence(conjugate):
    runs = {
        name: quick(conjugate, seed=seed, chain_method=method)
        for name, seed, method in [("a", 3, "sequential"), ("b", 3, "sequential"), ("processes", 3, "parallel"),
                                   ("other seed", 4, "sequential")]
    }
    reference = runs["a"]
    for name in ("b", "processes"):
        for site, value in reference.samples.items():
            assert torch.equal(runs[name].samples[site], value), (name, site)
        for stat, value in reference.sample_stats.items():
            np.testing.assert_array_equal(runs[name].sample_stats[stat], value)
    assert runs["processes"].info["chain_method"] == "parallel"
    assert not torch.equal(runs["other seed"].samples["layers.0.bias"], reference.samples["layers.0.bias"])


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
