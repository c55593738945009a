r"""NUTS speed: the collection's NUTS engines against NumPyro's NUTS on the same BNN, side by side.

The model: a tanh network with one hidden layer of 50 units, :math:`\mathcal{N}(0, 1)` on every
weight and bias, a learned noise :math:`\sigma \sim \text{HalfNormal}(1)`, Gaussian likelihood;
on toy1d (1-50-1, N=100, 152 latents) and on UCI boston split 0 (13-50-1, N=455, 752 latents),
standardised as :func:`bnn.datasets.load_dataset` does. Every engine runs one chain from its own
initialisation, in float64, on one thread, with the same warmup and draws, target acceptance 0.8
and maximum tree depth 10:

* ``nutpie`` and ``pyro``: ``fit(model, data, "nuts", engine=...)``, the model a Pyro program
  (nutpie on the model's flat potential, :class:`~bnn.inference.nuts.potential.FlatPotential`, backend ``auto``);
* ``numpyro``: the same model written in NumPyro, run by ``numpyro.infer.NUTS`` (JAX; its compile
  time is included in its wall time, as the collection's set-up is in its).

Printed per engine: wall seconds, gradient evaluations (the sum of leapfrog steps) per second,
mean tree depth, divergences, and the bulk ESS per second of the latents (median and minimum
over latents; the weights of a BNN are not identifiable, so the minimum is noisy), then each
engine's ratio to NumPyro. Runs repeat ``--repeats`` times, engines alternating, and the table
shows medians. Before that, the time per gradient of each backend of the flat potential on toy1d, and the
seconds a fresh process takes to build the ``numba`` potential with an empty numba cache (compilation) and with
the cache that run left (what every chain process pays once the cache exists), when ``--backends`` has ``numba``.
The last line is ``ess_per_s_ratio=<default engine (nutpie) / numpyro, median bulk ESS/s, toy1d>``.

``--modules`` runs instead the same 1-20-1 tanh network three ways on toy1d, side by side (alternating, medians of
``--repeats``): built in (``BayesianMLP(1, 1, hidden=(20,))``), from a torch module
(``from_module(nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 1)))``, lowered to the compiled kernel,
:mod:`bnn.inference.nuts.lowering`) and from a module of its own class (:class:`TanhNet`, not lowered: a torch
potential), each ``fit(network, toy1d, "nuts", num_chains=2, seed=0)`` timed end to end, with the backend its chains
ran on and its wall time's ratio to the built-in network's.

NumPyro and JAX are in the optional ``bench`` extra (``pip install -e ".[bench]"``); the package
never needs them.

Usage::

    python -m benchmarks.nuts_speed [--uci-dir UCI_DIR] [--engines nutpie,numpyro]
        [--warmup 300] [--draws 300] [--repeats 3] [--backends numba,numpy,trace,eager,compile]
    python -m benchmarks.nuts_speed --modules [--warmup 200] [--draws 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from bnn.datasets import Dataset, load_dataset  # noqa: E402
from bnn.inference import fit  # noqa: E402
from bnn.inference.nuts import DEFAULT_ENGINE  # noqa: E402
from bnn.inference.nuts.chain import tree_depth  # noqa: E402
from bnn.inference.nuts.potential import Backend, FlatPotential  # noqa: E402
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior, from_module  # noqa: E402
from torch import nn  # noqa: E402

HIDDEN = 50
TARGET_ACCEPT = 0.8
MAX_TREE_DEPTH = 10


@dataclass
class Run:
    """What one engine did in one run."""

    seconds: float
    gradients: int
    tree_depth: float
    divergences: int
    ess_bulk: np.ndarray  # per latent

    def row(self) -> dict[str, float]:
        """The table row: rates per second of wall time and ESS per 1,000 gradient evaluations."""
        return {
            "wall_s": self.seconds,
            "grads_per_s": self.gradients / self.seconds,
            "tree_depth": self.tree_depth,
            "divergences": self.divergences,
            "ess_per_s_median": float(np.median(self.ess_bulk)) / self.seconds,
            "ess_per_s_min": float(np.min(self.ess_bulk)) / self.seconds,
            "ess_per_1k_grads": 1000 * float(np.median(self.ess_bulk)) / self.gradients,
        }


def build_model(dataset: Dataset) -> BayesianMLP:
    """The benchmarked network for ``dataset``: d-50-1 tanh, N(0, 1) weights, learned noise with a HalfNormal(1) prior."""
    return BayesianMLP(dataset.in_features, 1, hidden=(HIDDEN,), activation="tanh", prior=GaussianPrior(1.0),
                       likelihood=GaussianLikelihood(scale=None, noise_prior_scale=1.0))


def ess_of(draws: dict[str, np.ndarray]) -> np.ndarray:
    """Bulk ESS of every scalar latent, from draws shaped ``(1, draws, ...)``."""
    summary = az.ess(az.convert_to_dataset({name: np.asarray(value, dtype=np.float64) for name, value in draws.items()}))
    return np.concatenate([np.ravel(summary[name].values) for name in draws])


def mean_tree_depth(n_steps: np.ndarray) -> float:
    """The mean over draws of ArviZ's tree depth (:func:`bnn.inference.nuts.chain.tree_depth`)."""
    return float(np.mean(tree_depth(n_steps)))


def run_collection(engine: str, dataset: Dataset, warmup: int, draws: int, seed: int) -> Run:
    """One chain of the collection's NUTS with ``engine`` through ``fit``, timed end to end."""
    start = time.perf_counter()
    posterior = fit(build_model(dataset), (dataset.x_train.double(), dataset.y_train.double()), "nuts", engine=engine,
                    num_warmup=warmup, num_samples=draws, num_chains=1, target_accept=TARGET_ACCEPT,
                    max_tree_depth=MAX_TREE_DEPTH, seed=seed, progress=False)
    seconds = time.perf_counter() - start
    stats = posterior.sample_stats
    return Run(seconds, posterior.record.gradient_evaluations, mean_tree_depth(stats["n_steps"]),
               int(stats["diverging"].sum()), ess_of({k: v.numpy() for k, v in posterior.samples.items()}))


def run_numpyro(dataset: Dataset, warmup: int, draws: int, seed: int) -> Run:
    """One chain of NumPyro's NUTS on the same model, timed with its JAX compilation."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    x, y = jnp.asarray(dataset.x_train.double().numpy()), jnp.asarray(dataset.y_train.double().numpy())

    def model(x, y):
        w1 = numpyro.sample("w1", dist.Normal(0.0, 1.0).expand([HIDDEN, x.shape[1]]).to_event(2))
        b1 = numpyro.sample("b1", dist.Normal(0.0, 1.0).expand([HIDDEN]).to_event(1))
        w2 = numpyro.sample("w2", dist.Normal(0.0, 1.0).expand([1, HIDDEN]).to_event(2))
        b2 = numpyro.sample("b2", dist.Normal(0.0, 1.0).expand([1]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        f = (jnp.tanh(x @ w1.T + b1) @ w2.T + b2)[:, 0]
        numpyro.sample("obs", dist.Normal(f, sigma), obs=y)

    start = time.perf_counter()
    kernel = NUTS(model, target_accept_prob=TARGET_ACCEPT, max_tree_depth=MAX_TREE_DEPTH)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=1, progress_bar=False)
    mcmc.warmup(jax.random.PRNGKey(seed), x, y, extra_fields=("num_steps",), collect_warmup=True)
    warmup_steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
    mcmc.run(jax.random.PRNGKey(seed + 1), x, y, extra_fields=("num_steps", "diverging"))
    samples = {name: np.asarray(value)[None] for name, value in mcmc.get_samples().items()}
    seconds = time.perf_counter() - start
    extra = mcmc.get_extra_fields()
    n_steps = np.asarray(extra["num_steps"])
    return Run(seconds, int(n_steps.sum()) + warmup_steps, mean_tree_depth(n_steps), int(np.sum(extra["diverging"])),
               ess_of(samples))


def backend_gradient_times(dataset: Dataset, backends: list[Backend], calls: int = 1000) -> dict[str, tuple[float, float]]:
    """Per backend of the flat potential: ``(build seconds, microseconds per value and gradient)``."""
    model = build_model(dataset)
    z = np.random.default_rng(0).normal(scale=0.1, size=sum(shape.numel() for shape in model.latent_shapes.values()))
    times = {}
    for backend in backends:
        start = time.perf_counter()
        potential = FlatPotential(model, dataset.x_train, dataset.y_train, backend=backend)
        built = time.perf_counter() - start
        for _ in range(20):
            potential.value_and_grad(z)
        start = time.perf_counter()
        for _ in range(calls):
            potential.value_and_grad(z)
        times[backend.value] = (built, 1e6 * (time.perf_counter() - start) / calls)
    return times


BUILD_NUMBA_POTENTIAL = (
    "import time; start = time.perf_counter(); from benchmarks.nuts_speed import FlatPotential, build_model, load_dataset; "
    "toy = load_dataset('toy1d'); FlatPotential(build_model(toy), toy.x_train, toy.y_train, backend='numba'); "
    "print(time.perf_counter() - start)"
)


def numba_build_seconds() -> tuple[float, float]:
    """Seconds a fresh process takes to import the package and build the ``numba`` potential on toy1d: with an
    empty numba cache (the kernel compiles), then with the cache that run left."""
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "NUMBA_CACHE_DIR": cache}
        runs = [subprocess.run([sys.executable, "-c", BUILD_NUMBA_POTENTIAL], env=environment, capture_output=True,
                               text=True, check=True) for _ in range(2)]
    cold, warm = (float(run.stdout.strip().splitlines()[-1]) for run in runs)
    return cold, warm


class TanhNet(nn.Module):
    """The 1-20-1 tanh network as a module of its own class: its forward is its own, so NUTS does not lower it to the
    compiled kernel (:mod:`bnn.inference.nuts.lowering`) and runs a torch potential."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(1, 20), nn.Linear(20, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x)))


MODULE_NETWORKS = {
    "BayesianMLP(1, 1, hidden=(20,))": lambda: BayesianMLP(1, 1, hidden=(20,)),
    "from_module(nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 1)))":
        lambda: from_module(nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 1))),
    "from_module(TanhNet())": lambda: from_module(TanhNet()),
}
"""The same network built in, from a module lowered to the kernel, and from a module that is not; the first is the
reference of the ratios. Same prior and likelihood (the defaults)."""


def module_side_by_side(warmup: int, draws: int, repeats: int, chains: int = 2) -> dict[str, dict[str, float]]:
    """Per network of :data:`MODULE_NETWORKS` (labelled with the backends its chains ran on): the median wall seconds
    of ``fit(network, toy1d, "nuts", ...)`` over ``repeats`` runs, the networks alternating within each, its median
    gradients, and its median's ratio to the first network's; after an untimed fit of 5 + 5 draws of each (the
    numba cache and the imports of a chain process warm for all)."""
    toy = load_dataset("toy1d")
    for make in MODULE_NETWORKS.values():
        fit(make(), toy, "nuts", num_warmup=5, num_samples=5, num_chains=chains, seed=0, progress=False)
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in MODULE_NETWORKS}
    backends = {}
    for repeat in range(repeats):
        for name, make in MODULE_NETWORKS.items():
            start = time.perf_counter()
            posterior = fit(make(), toy, "nuts", num_warmup=warmup, num_samples=draws, num_chains=chains, seed=0,
                            progress=False)
            runs[name].append((time.perf_counter() - start, posterior.record.gradient_evaluations))
            backends[name] = "/".join(sorted(set(posterior.record.chain_backends)))
            print(f"repeat {repeat} {name} [{backends[name]}]: {runs[name][-1][0]:.1f} s, {runs[name][-1][1]} gradients",
                  flush=True)
    medians = {name: [statistics.median(column) for column in zip(*rows)] for name, rows in runs.items()}
    reference = next(iter(medians.values()))[0]
    return {f"{name} [{backends[name]}]": {"wall_s": seconds, "ratio": seconds / reference, "gradients": gradients}
            for name, (seconds, gradients) in medians.items()}


def print_table(title: str, rows: dict[str, dict[str, float]], first: str = "engine") -> None:
    """Print ``rows`` (engine -> column -> value) as a Markdown table under ``title``."""
    print(f"\n{table(title, rows, first)}")


def table(title: str, rows: dict[str, dict[str, float]], first: str = "engine") -> str:
    """``rows`` (engine, or what ``first`` names -> column -> value) as a Markdown table under the line ``title``."""
    columns = list(next(iter(rows.values())))
    lines = [title, "", f"| {first} | " + " | ".join(columns) + " |", "| --- " * (len(columns) + 1) + "|"]
    lines += [f"| {engine} | " + " | ".join(f"{value:.4g}" for value in row.values()) + " |" for engine, row in rows.items()]
    return "\n".join(lines)


def tables_from_csv(path: Path) -> str:
    """The median and ratio tables of one or more runs from a CSV of their rows alone: a row per engine and table,
    with the run (a heading), the table's title line and its columns (a ratio table leaves the others empty)."""
    frame = pd.read_csv(path, keep_default_na=False)
    parts = []
    for run, tables in frame.groupby("run", sort=False):
        parts.append(f"## {run}")
        for title, rows in tables.groupby("table", sort=False):
            columns = [column for column in rows.columns[3:] if (rows[column] != "").any()]
            parts.append(table(title, {row["engine"]: {column: float(row[column]) for column in columns}
                                       for row in rows.to_dict("records")}))
    return "\n\n".join(parts) + "\n"


def benchmark(name: str, dataset: Dataset, engines: list[str], warmup: int, draws: int, repeats: int) -> dict:
    """Median rows per engine over ``repeats`` alternating runs, plus each engine's ratios to NumPyro."""
    runners: dict[str, Callable[[int], Run]] = {
        engine: (lambda seed, e=engine: run_numpyro(dataset, warmup, draws, seed)) if engine == "numpyro"
        else (lambda seed, e=engine: run_collection(e, dataset, warmup, draws, seed))
        for engine in engines
    }
    runs: dict[str, list[dict[str, float]]] = {engine: [] for engine in engines}
    for repeat in range(repeats):
        for engine, runner in runners.items():
            runs[engine].append(runner(repeat).row())
            print(f"{name} repeat {repeat} {engine}: {runs[engine][-1]}", flush=True)
    medians = {engine: {key: statistics.median(r[key] for r in rows) for key in rows[0]} for engine, rows in runs.items()}
    print_table(f"{name}: {warmup} warmup + {draws} draws, 1 chain, medians of {repeats}", medians)
    if "numpyro" in medians:
        reference = medians["numpyro"]
        ratios = {engine: {key: row[key] / reference[key] for key in ("grads_per_s", "ess_per_s_median", "ess_per_s_min")}
                  for engine, row in medians.items()}
        print_table(f"{name}: ratio to numpyro", ratios)
        return ratios
    return {}


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark on one torch thread; return toy1d's ratios to NumPyro (empty without NumPyro), or with
    ``--modules`` the rows of :func:`module_side_by_side`."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uci-dir", help="the UCI folder, for boston split 0 (left out without it)")
    parser.add_argument("--engines", default="nutpie,numpyro", help="comma-separated: nutpie, pyro, numpyro")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", default="numba,numpy,trace,eager,compile", help="flat-potential backends to time")
    parser.add_argument("--modules", action="store_true",
                        help="instead: the network built in against the same network from torch modules (module notes)")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if args.modules:
            rows = module_side_by_side(args.warmup, args.draws, args.repeats)
            print_table(f"toy1d 1-20-1 tanh: {args.warmup} warmup + {args.draws} draws, 2 chains, medians of "
                        f"{args.repeats}", rows, first="network [backend]")
            return rows
        return _run(args)
    finally:
        torch.set_num_threads(threads)


def _run(args: argparse.Namespace) -> dict:
    """The backend timings, then toy1d (and boston with ``--uci-dir``) side by side; print the ratio line."""
    engines = [engine.strip() for engine in args.engines.split(",")]
    toy = load_dataset("toy1d")
    print("flat potential on toy1d, per value and gradient:")
    backends = [Backend(name.strip()) for name in args.backends.split(",")]
    for backend, (built, micro) in backend_gradient_times(toy, backends).items():
        print(f"  {backend:8s} build {built:6.2f} s   {micro:8.1f} us")
    if Backend.NUMBA in backends:
        cold, warm = numba_build_seconds()
        print(f"numba potential in a fresh process (imports included): {cold:.2f} s with an empty cache, {warm:.2f} s cached")
    ratios = benchmark("toy1d 1-50-1", toy, engines, args.warmup, args.draws, args.repeats)
    if args.uci_dir:
        boston = load_dataset("bostonHousing", uci_dir=args.uci_dir, split=0)
        benchmark("boston 13-50-1 split 0", boston, engines, args.warmup, args.draws, args.repeats)
    if DEFAULT_ENGINE.value in ratios:
        print(f"ess_per_s_ratio={ratios[DEFAULT_ENGINE.value]['ess_per_s_median']:.3f}")
    return ratios


if __name__ == "__main__":
    main()
