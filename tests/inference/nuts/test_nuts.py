"""NUTS through ``fit``: option checks, sampler statistics, seeds, processes, convergence flags, CLI.

The exactness check against the conjugate posterior lives in test_exactness.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyro.distributions as dist
import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.diagnostics.convergence import ChainDiagnostics, predictive_r_hat, r_hat_over_points
from bnn.inference.map_search.map_estimate import map_weights
from bnn.inference.nuts import ConvergenceWarning, InitStrategy, SequentialChainsWarning
from bnn.inference.nuts.chain import tree_depth
from bnn.inference.nuts.chains import available_cores
from bnn.inference.nuts.engines import pyro as pyro_engine
from bnn.inference.nuts.engines.pyro import initial_point
from bnn.inference.nuts.fit import _convergence_message
from bnn.models import BayesianMLP, Prior

from bnn.cli.main import main
from bnn.runtime.atomic import MARKER
from bnn.runtime.seeding import seeded
from tests.support.conjugate import conjugate_problem

# short runs are unconverged by design; test_bad_runs_are_flagged checks the warning itself
pytestmark = pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")
STAT_NAMES = {"diverging", "n_steps", "tree_depth", "step_size", "acceptance_rate", "energy"}
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def problem():
    return conjugate_problem(dtype=torch.float32)


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield conjugate_problem()
    torch.set_default_dtype(previous)


def quick(problem, **options):
    """A short sequential run; ``options`` override."""
    settings = dict(num_warmup=40, num_samples=20, num_chains=2, chain_method="sequential", init="prior", progress=False)
    return fit(problem.model, (problem.x, problem.y), "nuts", **{**settings, **options})


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(num_warmup=-1), "num_warmup must be an integer >= 0"),
        (dict(num_samples=3), "num_samples must be an integer >= 4"),
        (dict(num_chains=0), "num_chains must be an integer >= 1"),
        (dict(num_chains=2.0), "num_chains must be an integer >= 1"),
        (dict(target_accept=1.0), r"target_accept must be a probability in \(0, 1\)"),
        (dict(max_tree_depth=0), "max_tree_depth must be an integer >= 1"),
        (dict(dense_mass="yes"), "dense_mass must be True or False"),
        (dict(jit_compile=1), "jit_compile must be True or False"),
        (dict(progress=None), "progress must be True or False"),
        (dict(init="mode"), r"unknown init 'mode'; choose from \['prior', 'map'\]"),
        (dict(init={"layers.9.weight": 0.0}), r"init names unknown sites \['layers.9.weight'\]"),
        (dict(init={"layers.0.bias": torch.zeros(3, 1)}), r"init\['layers.0.bias'\] has shape \(3, 1\)"),
        (dict(init={"layers.0.bias": torch.tensor([float("nan")])}), "outside the support"),
        (dict(chain_method="threads"), "unknown chain_method 'threads'"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(steps=10), r"method 'nuts' takes no option\(s\) \['steps'\]"),
    ],
)
def test_bad_options_raise_before_sampling(problem, options, message):
    with pytest.raises(ValueError, match=message):
        quick(problem, **options)


def test_init_outside_the_prior_support_is_refused():
    model = BayesianMLP(2, 1, hidden=(), likelihood={"name": "gaussian", "scale": None})
    with pytest.raises(ValueError, match=r"init\['sigma'\] lies outside the support"):
        fit(model, (torch.randn(5, 2), torch.randn(5)), "nuts", init={"sigma": -1.0}, progress=False)


def test_sample_stats_have_one_value_per_draw(problem):
    posterior = quick(problem, max_tree_depth=3)
    assert posterior.samples["layers.0.weight"].shape == (2, 20, 1, 2)
    assert set(posterior.sample_stats) == STAT_NAMES
    stats = posterior.sample_stats
    for name in STAT_NAMES:
        assert stats[name].shape == (2, 20), name
    assert stats["diverging"].dtype == bool
    # at most 2^3 - 1 leapfrog steps; depth is ArviZ's floor(log2(n_steps)) + 1
    assert np.all((stats["n_steps"] >= 1) & (stats["n_steps"] <= 7))
    np.testing.assert_array_equal(stats["tree_depth"], np.floor(np.log2(stats["n_steps"])) + 1)
    assert np.all((stats["acceptance_rate"] >= 0) & (stats["acceptance_rate"] <= 1))
    assert np.all(stats["step_size"] > 0) and np.all(stats["step_size"] == stats["step_size"][:, :1])
    idata = posterior.to_inference_data()
    assert dict(idata.sample_stats.sizes) == {"chain": 2, "draw": 20}
    info = posterior.record.to_json()
    assert (info["method"], info["guide"], info["chain_method"], info["init"]) == ("nuts", None, "sequential", "prior")
    assert set(info["diagnostics"]) == {"r_hat_max", "r_hat_predictive", "ess_bulk_min", "ess_tail_min", "divergences",
                                        "converged", "ess_predictive_min", "num_chains", "failed_chains",
                                        "r_hat_predictive_bulk"}
    assert info["diagnostics"]["divergences"] == int(stats["diverging"].sum())


@pytest.mark.subprocess
def test_same_seed_same_draws_in_processes_and_in_sequence(float64):
    """On the default engine, nutpie (test_nutpie_engine.py runs no chains in processes: this test is its own)."""
    runs = {
        name: quick(float64, seed=seed, chain_method=method)
        for name, seed, method in [("a", 5, "sequential"), ("b", 5, "sequential"), ("processes", 5, "parallel"),
                                   ("other seed", 6, "sequential")]
    }
    reference = runs["a"]
    assert reference.record.options.engine == runs["processes"].record.options.engine == "nutpie"
    assert reference.samples["layers.0.bias"].dtype == torch.float64
    for name in ("b", "processes"):
        for site, value in reference.samples.items():
            assert torch.equal(runs[name].samples[site], value), (name, site)
        for stat, value in reference.sample_stats.items():
            np.testing.assert_array_equal(runs[name].sample_stats[stat], value)
    assert not torch.equal(runs["other seed"].samples["layers.0.bias"], reference.samples["layers.0.bias"])
    assert runs["processes"].record.chain_method == "parallel"
    assert runs["processes"].to_inference_data().posterior.sizes["chain"] == 2


@pytest.mark.parametrize(
    "options, message",
    [
        # chains start far apart in the prior: they disagree on the predictions too
        (dict(num_warmup=0, engine="pyro"), r"disagree on the predictions: predictive R-hat .* > 1.01 .*: try a longer "
         r"adaptation and more draws \(num_warmup=1000, num_samples=1000\), .*init='map'"),
        # a step size far too large
        (dict(num_warmup=10, target_accept=0.05), r"divergent transitions.* try .*a smaller step \(target_accept=0.95\)"),
    ],
)
def test_bad_runs_are_flagged(problem, options, message):
    with pytest.warns(ConvergenceWarning, match=message):
        posterior = quick(problem, **options)
    assert posterior.record.converged is False
    assert posterior.record.diagnostics.converged is False


def test_chains_apart_only_in_their_spread_are_told_to_draw_more():
    """Chains that agree on where the predictions lie (bulk R-hat at most 1.01) and fail on their spread alone, with
    enough draws for the bulk, are told to draw more rather than to start elsewhere."""
    spread = ChainDiagnostics(r_hat_max=1.013, r_hat_predictive=1.022, r_hat_predictive_bulk=1.003, ess_bulk_min=1786.0,
                              ess_tail_min=595.0, divergences=0, converged=False, ess_predictive_min=1709.0, num_chains=2)
    message = _convergence_message(spread, 2, 700)
    assert "but not on how far they spread" in message and "more draws per chain (num_samples=2100" in message
    assert "num_warmup=1000" not in message
    apart = replace(spread, r_hat_predictive_bulk=1.02)
    assert "num_warmup=1000, num_samples=1000" in _convergence_message(apart, 2, 700)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
def test_initial_points(float64):
    with seeded(0):
        given, _, _ = initial_point(float64.model, float64.x, float64.y, {"layers.0.bias": torch.tensor([2.0])},
                                    jit_compile=False)
        mode, _, _ = initial_point(float64.model, float64.x, float64.y, InitStrategy.MAP, jit_compile=True)
    assert given["layers.0.bias"].item() == 2.0
    # the posterior is Gaussian, so its mode is the exact mean m; the MAP fit stops once its Newton decrement, the
    # distance to the mode in posterior standard deviations, is below map_tolerance = 0.1
    error = (float64.flatten(mode) - float64.mean) / float64.cov.diagonal().sqrt()
    assert error.abs().max() < 0.1


def test_a_chains_map_start_keeps_the_polish_warning_to_itself(float64, monkeypatch):
    """A chain's start need not be the exact mode: the polish's stopped-short warning, in the words the MAP fit
    really uses, is not passed on."""
    never_close_enough = partial(map_weights, steps=5, tolerance=1e-300, max_iter=1)  # one step: no L-BFGS after it
    with pytest.warns(RuntimeWarning, match=r"the MAP polish \(levenberg-marquardt\) stopped"):
        never_close_enough(float64.model, float64.x, float64.y)
    monkeypatch.setattr(pyro_engine, "map_weights", never_close_enough)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        initial_point(float64.model, float64.x, float64.y, InitStrategy.MAP, jit_compile=False)
    assert [str(warning.message) for warning in caught] == []


def test_each_chain_starts_from_its_own_given_values(problem):
    starts = torch.tensor([[3.0], [-3.0]])  # one start per chain
    per_chain = quick(problem, init={"layers.0.bias": starts}, num_warmup=5, num_samples=4)
    assert per_chain.record.init == "values"
    for chain in range(2):  # the same chain seed from the same start repeats the draws exactly
        shared = quick(problem, init={"layers.0.bias": starts[chain]}, num_warmup=5, num_samples=4)
        same, other = per_chain.samples["layers.0.bias"], shared.samples["layers.0.bias"]
        assert torch.equal(same[chain], other[chain]) and not torch.equal(same[1 - chain], other[1 - chain])


@pytest.mark.long
def test_command_line_writes_the_three_files_with_diagnostics(tmp_path, capsys):
    out = tmp_path / "run"
    main(["fit", "--method", "nuts", "--dataset", "toy1d", "--hidden", "3", "--num-warmup", "10", "--num-samples",
          "10", "--num-chains", "1", "--max-tree-depth", "4", "--init", "map", "--quiet", "--out", str(out)])
    assert {p.name for p in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "predictive.png", MARKER}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "nuts" and metrics["r_hat_max"] is None  # one chain: no R-hat
    assert {"ess_bulk_min", "ess_tail_min", "divergences", "converged"} <= set(metrics)
    info = json.loads((out / "fit.json").read_text())["record"]
    assert (info["options"]["num_warmup"], info["options"]["max_tree_depth"], info["init"]) == (10, 4, "map")
    assert set(Posterior.load(out).sample_stats) == STAT_NAMES


def test_command_line_refuses_svi_options_for_nuts(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--method", "nuts", "--steps", "10", "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "method 'nuts' takes no option(s) ['steps']" in capsys.readouterr().err


def test_tree_depth_is_arviz_convention():
    np.testing.assert_array_equal(tree_depth(np.array([1, 2, 3, 7, 8, 1023])), [1, 2, 2, 3, 4, 10])


def test_predictive_r_hat_sees_through_permuted_hidden_units():
    """Two chains in the two orders of the hidden units of a 1-2-1 net: every weight disagrees between the
    chains, the function they draw is the same."""
    model = BayesianMLP(1, 1, hidden=(2,))
    generator = torch.Generator().manual_seed(0)
    draws, jitter = 1000, lambda *shape: 0.01 * torch.randn(2, draws, *shape, generator=generator)
    first, second = torch.tensor([[1.0], [-2.0]]), torch.tensor([0.5, -1.0])
    order = torch.tensor([[0, 1], [1, 0]])  # chain 1 swaps the units
    samples = {
        "layers.0.weight": first[order][:, None] + jitter(2, 1),
        "layers.0.bias": second[order][:, None] + jitter(2),
        "layers.1.weight": torch.tensor([0.3, 0.7])[order][:, None, None] + jitter(1, 2),
        "layers.1.bias": jitter(1),
    }
    x = torch.linspace(-2, 2, 7)[:, None]
    weight_r_hat = r_hat_over_points(samples["layers.0.weight"].numpy())
    assert weight_r_hat > 1.5  # chains 1.5 apart with a spread of 0.01: as far as rank-normalised R-hat goes
    # the same function: R-hat of f within the sampling noise of 2 x 1000 independent draws
    assert predictive_r_hat(model, samples, x) < 1.01


def test_predictive_r_hat_needs_two_chains():
    with pytest.raises(ValueError, match=r"chains >= 2.*run two or more chains"):
        r_hat_over_points(np.zeros((1, 10, 3)))


class DiesInWorkers(BayesianMLP):
    """A model that kills a worker process that runs it, as a crash there does (importable here)."""

    def __call__(self, *args, **kwargs):
        if multiprocessing.parent_process() is not None:
            os._exit(1)
        return super().__call__(*args, **kwargs)


class RecordsItsProcess(BayesianMLP):
    """A model that writes, once per process that runs it, the process's torch threads and ``OMP_NUM_THREADS``."""

    folder: Path

    def __call__(self, *args, **kwargs):
        record = self.folder / str(os.getpid())
        if not record.exists():
            record.write_text(json.dumps([torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")]))
        return super().__call__(*args, **kwargs)


@pytest.mark.subprocess
@pytest.mark.skipif(available_cores() < 2, reason="two chains share one worker on one core")
def test_chains_run_in_their_own_processes_on_one_thread(problem, tmp_path):
    model = RecordsItsProcess.from_config(problem.model.config())
    model.folder = tmp_path
    posterior = fit(model, (problem.x, problem.y), "nuts", num_warmup=20, num_samples=10, num_chains=2,
                    chain_method="parallel", progress=False, engine="pyro")
    assert posterior.record.chain_method == "parallel"
    records = {int(path.name): json.loads(path.read_text()) for path in tmp_path.iterdir()}
    workers = set(records) - {os.getpid()}  # this process traces the model once to check the options
    assert len(workers) == 2 and all(records[pid] == [1, "1"] for pid in workers), records


@dataclass(frozen=True)
class LockedPrior(Prior):
    """A prior that holds a lock: no pickler sends it to a worker process, cloudpickle included."""

    lock: Any = field(default_factory=threading.Lock, compare=False)

    def distribution(self, site):
        return dist.Normal(0.0, 1.0).expand(site.shape)


@pytest.mark.long
@pytest.mark.skipif(available_cores() < 2, reason="chain_method='auto' runs in sequence on one core")
def test_a_model_that_cannot_be_pickled_falls_back_to_sequential_chains(problem):
    model = BayesianMLP(2, 1, hidden=(), prior=LockedPrior(), likelihood=problem.model.likelihood)
    data = (problem.x, problem.y)
    with pytest.warns(SequentialChainsWarning, match=r"cannot be pickled.*keep locks, open files.*chain_method='sequential'"):
        posterior = fit(model, data, "nuts", num_warmup=20, num_samples=10, num_chains=2, progress=False)
    assert posterior.record.chain_method == "sequential" and posterior.samples["layers.0.bias"].shape == (2, 10, 1)
    with pytest.raises(ValueError, match=r"chain_method='parallel' cannot run the chains in processes: .*cannot be pickled"):
        fit(model, data, "nuts", num_warmup=20, num_samples=10, num_chains=2, chain_method="parallel", progress=False)


def assert_same_draws(posterior, reference) -> None:
    for site, value in reference.samples.items():
        assert torch.equal(posterior.samples[site], value), site


@pytest.mark.slow  # make test keeps the script run as python script.py, the same spawn of a __main__ module
@pytest.mark.subprocess
def test_classes_defined_in_a_function_or_in_main_run_in_processes(problem, monkeypatch):
    """cloudpickle sends by value what a worker could not import: a class defined inside a function, and one of a
    ``__main__`` that is no importable file (a notebook, an interactive session)."""
    main_module = sys.modules["__main__"]

    @dataclass(frozen=True)
    class LocalPrior(Prior):  # defined in a function
        def distribution(self, site):
            return dist.Normal(0.0, 1.0).expand(site.shape)

    @dataclass(frozen=True)
    class NotebookPrior(Prior):
        def distribution(self, site):
            return dist.Normal(0.0, 1.0).expand(site.shape)

    NotebookPrior.__module__, NotebookPrior.__qualname__ = "__main__", "NotebookPrior"
    monkeypatch.setattr(main_module, "NotebookPrior", NotebookPrior, raising=False)
    monkeypatch.setattr(main_module, "__spec__", None)
    monkeypatch.delattr(main_module, "__file__", raising=False)
    options = dict(num_warmup=20, num_samples=10, num_chains=2, progress=False, seed=4)
    for prior in (LocalPrior(), NotebookPrior()):
        model = BayesianMLP(2, 1, hidden=(), prior=prior, likelihood=problem.model.likelihood)
        in_processes = fit(model, (problem.x, problem.y), "nuts", chain_method="parallel", **options)
        assert in_processes.record.chain_method == "parallel", type(prior).__name__
        assert_same_draws(in_processes, fit(model, (problem.x, problem.y), "nuts", chain_method="sequential", **options))


MAIN_SCRIPT = """
import json, torch
import pyro.distributions as dist
from dataclasses import dataclass
from bnn.inference import fit
from bnn.models import BayesianMLP, Prior
from tests.support.conjugate import conjugate_problem

@dataclass(frozen=True)
class ScriptPrior(Prior):  # in __main__ of `python -c`: no file a worker could import it from
    def distribution(self, site):
        return dist.Normal(0.0, 1.0).expand(site.shape)

problem = conjugate_problem(dtype=torch.float32)
model = BayesianMLP(2, 1, hidden=(), prior=ScriptPrior(), likelihood=problem.model.likelihood)
runs = {method: fit(model, (problem.x, problem.y), "nuts", num_warmup=20, num_samples=10, num_chains=2, progress=False,
                    chain_method=method, seed=2) for method in ("parallel", "sequential")}
print(json.dumps({method: {"chain_method": run.record.chain_method,
                           "draws": {site: value.tolist() for site, value in run.samples.items()}}
                  for method, run in runs.items()}))
"""


@pytest.mark.slow  # make test keeps the script run as python script.py, the same spawn of a __main__ module
@pytest.mark.subprocess
def test_a_prior_defined_in_a_python_c_script_samples_in_processes():
    done = subprocess.run([sys.executable, "-c", MAIN_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout.splitlines()[-1])
    assert runs["parallel"]["chain_method"] == "parallel" and runs["sequential"]["chain_method"] == "sequential"
    assert runs["parallel"]["draws"] == runs["sequential"]["draws"]
    assert np.shape(runs["parallel"]["draws"]["layers.0.bias"]) == (2, 10, 1)


@pytest.mark.subprocess
@pytest.mark.skipif(available_cores() < 2, reason="chain_method='auto' runs in sequence on one core")
def test_a_broken_process_pool_falls_back_to_the_same_draws_in_sequence(problem):
    model = DiesInWorkers.from_config(problem.model.config())
    options = dict(num_warmup=20, num_samples=10, num_chains=2, progress=False, seed=3)
    with pytest.warns(SequentialChainsWarning, match=r"a worker process died \(TerminatedWorkerError"):
        fallen_back = fit(model, (problem.x, problem.y), "nuts", **options)
    reference = fit(model, (problem.x, problem.y), "nuts", chain_method="sequential", **options)
    assert fallen_back.record.chain_method == "sequential"
    for site, value in reference.samples.items():
        assert torch.equal(fallen_back.samples[site], value), site


SCRIPT_WITHOUT_MAIN_GUARD = """
import json
print("top level of the script runs", flush=True)
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.models import BayesianMLP

model = BayesianMLP(1, 1, hidden=(2,), likelihood={"name": "gaussian", "scale": 0.3})
posterior = fit(model, load_toy1d(n_train=20, n_test=5), "nuts", num_warmup=10, num_samples=5, num_chains=2,
                chain_method="parallel", max_tree_depth=3, init="prior", progress=False, seed=0)
print(json.dumps(posterior.record.chain_method), flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")
def test_a_script_run_as_python_script_py_runs_its_top_level_once(tmp_path):
    """The chain processes do not re-import ``__main__`` (multiprocessing's spawn would, as ``__mp_main__``): a
    script without an ``if __name__ == "__main__":`` guard neither prints twice nor starts its fit again."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT_WITHOUT_MAIN_GUARD)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count("top level of the script runs") == 1, done.stdout
    assert json.loads(lines[-1]) == "parallel"


def test_a_run_its_cost_estimate_puts_past_a_day_is_refused_before_the_chains_map_starts(monkeypatch):
    """At the deepest trees, 1 chain x (100 + 100,000) draws x (2^20 - 1) leapfrog steps are 10^11 gradients: days
    even at a microsecond each."""
    monkeypatch.setattr("bnn.inference.nuts.fit._sample", lambda *args: pytest.fail("the chains started"))
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    x = torch.linspace(-1, 1, 20).unsqueeze(-1)
    with pytest.raises(ValueError, match=r"NUTS would take up to [\d,]+ h at full tree depth, past a day: 1 chains x "
                                         r"\(100 \+ 100000\) draws x 1048575 leapfrog steps \(tree depth 20\) = "
                                         r"104,962,357,500 gradients x [\d.e+-]+ s measured per gradient of the potential; "
                                         r"refused before the chains' MAP starts: lower max_tree_depth \(now 20\), "
                                         r"num_samples or num_warmup"):
        fit(model, (x, x.squeeze(-1)), "nuts", num_warmup=100, num_samples=100_000, max_tree_depth=20, num_chains=1)
