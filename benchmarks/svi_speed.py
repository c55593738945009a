r"""Time per SVI step: the Bayes-by-Backprop guide and fit's default guide through ``fit`` against hand-written loops.

Both fit the same network and data: a 1-50-1 tanh network on ``toy1d`` (100 points, full
batch), prior :math:`\mathcal{N}(0, 1)` on every weight, Gaussian likelihood with fixed
noise 0.1, :math:`q(w) = \mathcal{N}(\mu, \operatorname{softplus}(\rho)^2)` initialised
:math:`\mu` from the prior and :math:`\rho = -3`, the closed-form KL, one particle, Adam
with rate 0.01. The reference is a plain PyTorch loop with no Pyro in it, every formula
written out (the log-likelihood, the KL); a second plain loop writes the same step with
``torch.distributions`` (``Normal(...).rsample``, ``.log_prob``, ``kl_divergence``), the way
such loops are often written, and is timed alongside for comparison. ``fit``'s default guide (the same
guide with local reparameterisation) is timed against a third plain loop that draws each layer's
pre-activations the same way, and AutoNormal against the first.

Runs alternate (reference, ``fit``, reference, ``fit``, ...) so both see the same machine
load, with ``torch.set_num_threads(1)``. Times are the CPU time of the running thread
(``time.thread_time``), which a shared machine inflates far less than wall time. The time per step
leaves out the first step (``JitTrace_ELBO`` compiles then; its wall time is reported separately as
"first step"), so a step time is ``(total - first step) / (steps - 1)``; for ``fit``, whose set-up and
final draws are not steps, the CPU time of the same fit with 2 steps is taken off instead. A run's
ratio divides its step time by the step time of its reference run in the same repeat; the table
shows median ratios, and the last line printed is ``step_time_ratio=<x>``: the JIT-compiled
Bayes-by-Backprop ``fit`` against the written-out reference (the lines before it: the default guide
against the local-reparameterisation loop, AutoNormal against the reference).

Usage::

    python -m benchmarks.svi_speed [--steps 3000] [--repeats 3] [--context] [--csv runs.csv]

``--context`` adds rows for the meanfield guide without JIT, with and without local reparameterisation. ``--csv``
writes each run's times of every repeat, from which :func:`tables_from_csv` prints the table again.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior
from torch.distributions import Normal, kl_divergence

from benchmarks.provenance import read_rows

HIDDEN = 50
NOISE = 0.1
PRIOR_SCALE = 1.0
INIT_RHO = -3.0
LR = 0.01


def build_model() -> BayesianMLP:
    """The benchmarked network: 1-50-1 tanh, N(0, 1) prior, fixed noise."""
    return BayesianMLP(
        1, 1, hidden=(HIDDEN,), activation="tanh", prior=GaussianPrior(PRIOR_SCALE), likelihood=GaussianLikelihood(NOISE)
    )


def reference_loop(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int, local: bool = False) -> tuple[float, float]:
    r"""Bayes by Backprop in plain PyTorch; return ``(first step seconds, seconds of the other steps)``.

    With ``local`` each layer's pre-activations are drawn instead of its weights (local reparameterisation):
    :math:`a \sim \mathcal{N}(h\mu_W^\top + \mu_b,\ h^2 (\sigma_W^2)^\top + \sigma_b^2)`.
    """
    torch.manual_seed(seed)
    shapes = [(HIDDEN, 1), (HIDDEN,), (1, HIDDEN), (1,)]
    sizes = [math.prod(shape) for shape in shapes]
    mu = (PRIOR_SCALE * torch.randn(sum(sizes))).requires_grad_()
    rho = torch.full((sum(sizes),), INIT_RHO, requires_grad=True)
    optimiser = torch.optim.Adam([mu, rho], lr=LR)
    log_norm = 0.5 * math.log(2 * math.pi) + math.log(NOISE)
    start = time.thread_time()
    first = 0.0
    for step in range(steps):
        sigma = F.softplus(rho)
        if local:
            f = _local_output(x, [part.reshape(shape) for part, shape in zip(torch.split(mu, sizes), shapes)],
                              [part.reshape(shape) for part, shape in zip(torch.split(sigma, sizes), shapes)])
        else:
            w = mu + sigma * torch.randn(sum(sizes))
            w1, b1, w2, b2 = (part.reshape(shape) for part, shape in zip(torch.split(w, sizes), shapes))
            f = (torch.tanh(x @ w1.T + b1) @ w2.T + b2)[:, 0]
        nll = (0.5 * ((y - f) / NOISE) ** 2 + log_norm).sum()
        kl = (math.log(PRIOR_SCALE) - torch.log(sigma) + (sigma**2 + mu**2) / (2 * PRIOR_SCALE**2) - 0.5).sum()
        loss = nll + kl
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        loss.item()  # SVI returns the loss as a float every step: the same synchronisation
        if step == 0:
            first = time.thread_time() - start
    return first, time.thread_time() - start - first


def _local_output(x: torch.Tensor, loc: list[torch.Tensor], scale: list[torch.Tensor]) -> torch.Tensor:
    """The 1-50-1 network's output with both layers' pre-activations drawn (local reparameterisation)."""
    w1, b1, w2, b2 = loc
    s1, t1, s2, t2 = scale
    a1 = x @ w1.T + b1 + ((x**2) @ (s1**2).T + t1**2).sqrt() * torch.randn(x.shape[0], HIDDEN)
    h = torch.tanh(a1)
    return (h @ w2.T + b2 + ((h**2) @ (s2**2).T + t2**2).sqrt() * torch.randn(x.shape[0], 1))[:, 0]


def distributions_loop(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int) -> tuple[float, float]:
    """The same loop written with ``torch.distributions``; return ``(first step seconds, seconds of the other steps)``."""
    torch.manual_seed(seed)
    shapes = [(HIDDEN, 1), (HIDDEN,), (1, HIDDEN), (1,)]
    sizes = [math.prod(shape) for shape in shapes]
    mu = (PRIOR_SCALE * torch.randn(sum(sizes))).requires_grad_()
    rho = torch.full((sum(sizes),), INIT_RHO, requires_grad=True)
    optimiser = torch.optim.Adam([mu, rho], lr=LR)
    prior = Normal(torch.zeros(sum(sizes)), torch.full((sum(sizes),), PRIOR_SCALE))
    start = time.thread_time()
    first = 0.0
    for step in range(steps):
        q = Normal(mu, F.softplus(rho))
        w1, b1, w2, b2 = (part.reshape(shape) for part, shape in zip(torch.split(q.rsample(), sizes), shapes))
        f = (torch.tanh(x @ w1.T + b1) @ w2.T + b2)[:, 0]
        loss = kl_divergence(q, prior).sum() - Normal(f, NOISE).log_prob(y).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        loss.item()
        if step == 0:
            first = time.thread_time() - start
    return first, time.thread_time() - start - first


def pyro_fit(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int, guide: str | None, jit: bool,
             local: bool = False) -> tuple[float, float]:
    """The same fit through :func:`bnn.inference.fit` (``guide=None``: fit's default guide and its default options);
    return ``(first step seconds, CPU seconds of the other steps)``.

    The other steps' CPU time is that of the fit less that of the same fit with 2 steps (the set-up, the
    compilation and the draws), over ``steps - 2`` steps, scaled to ``steps - 1`` like the loops'.
    """
    if guide is None:
        chosen = {}
    elif guide == "meanfield":
        chosen = {"guide": guide, "guide_options": {"init_rho": INIT_RHO, "local_reparameterisation": local}}
    else:
        chosen = {"guide": guide}

    def cpu_seconds(length: int):
        start = time.thread_time()
        with warnings.catch_warnings():  # these runs time steps: their ELBO is meant to be still rising
            warnings.simplefilter("ignore", ConvergenceWarning)
            posterior = fit(build_model(), (x, y), "svi", **chosen, steps=length, lr=LR, lr_schedule="constant", jit=jit,
                            num_particles=1, num_samples=1, seed=seed, progress=False)
        return time.thread_time() - start, posterior.record.first_step_seconds

    total, first = cpu_seconds(steps)
    setup, _ = cpu_seconds(2)
    return first, (total - setup) * (steps - 1) / (steps - 2)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.svi_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--context", action="store_true", help="also time the meanfield guide without JIT")
    parser.add_argument("--csv", type=Path, help="write every run's times of every repeat here")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.repeats < 1:
        parser.error("--steps must be at least 2 and --repeats at least 1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)


REFERENCE = "pytorch BBB loop (reference)"
LOCAL_REFERENCE = "pytorch BBB loop, local reparam. (reference)"
DISTRIBUTIONS = "pytorch BBB loop, torch.distributions"
MEANFIELD = "fit, meanfield guide (BBB), jit"
DEFAULT = "fit, default guide (meanfield, local reparam.), jit"
AUTONORMAL = "fit, autonormal guide, jit"


def _run(args: argparse.Namespace) -> float:
    data = load_toy1d()
    x, y = data.x_train, data.y_train
    runs = {
        REFERENCE: (REFERENCE, lambda seed: reference_loop(x, y, args.steps, seed)),
        LOCAL_REFERENCE: (LOCAL_REFERENCE, lambda seed: reference_loop(x, y, args.steps, seed, local=True)),
        DISTRIBUTIONS: (REFERENCE, lambda seed: distributions_loop(x, y, args.steps, seed)),
        MEANFIELD: (REFERENCE, lambda seed: pyro_fit(x, y, args.steps, seed, "meanfield", True)),
        DEFAULT: (LOCAL_REFERENCE, lambda seed: pyro_fit(x, y, args.steps, seed, None, True)),
        AUTONORMAL: (REFERENCE, lambda seed: pyro_fit(x, y, args.steps, seed, "autonormal", True)),
    }
    if args.context:
        runs["fit, meanfield guide (BBB), no jit"] = (REFERENCE, lambda seed: pyro_fit(x, y, args.steps, seed,
                                                                                       "meanfield", False))
        runs["fit, meanfield guide, local reparam., no jit"] = (
            LOCAL_REFERENCE, lambda seed: pyro_fit(x, y, args.steps, seed, "meanfield", False, local=True))
    step_ms: dict[str, list[float]] = {name: [] for name in runs}
    first_s: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(args.repeats):
        for name, (_, run) in runs.items():
            first, rest = run(repeat)
            first_s[name].append(first)
            step_ms[name].append(1000 * rest / (args.steps - 1))
    rows = [{"run": name, "reference": reference, "steps": args.steps, "ms_per_step": step_ms[name],
             "first_step_s": first_s[name]} for name, (reference, _) in runs.items()]
    if args.csv is not None:
        joined = [{**row, **{key: ", ".join(map(str, row[key])) for key in ("ms_per_step", "first_step_s")}}
                  for row in rows]
        pd.DataFrame(joined).to_csv(args.csv, index=False)
    print(table(rows))
    print()
    print(f"step_time_ratio_autonormal={ratio(rows, AUTONORMAL):.3f}")
    print(f"step_time_ratio_default_guide={ratio(rows, DEFAULT):.3f}")
    print(f"step_time_ratio={ratio(rows, MEANFIELD):.3f}")
    return ratio(rows, MEANFIELD)


def ratio(rows: list[dict], name: str) -> float:
    """The median over the repeats of run ``name``'s step time over its reference's in the same repeat."""
    by_name = {row["run"]: row for row in rows}
    run = by_name[name]
    return statistics.median(t / r for t, r in zip(run["ms_per_step"], by_name[run["reference"]]["ms_per_step"]))


def table(rows: list[dict]) -> str:
    """The Markdown table of ``rows`` (one per run: its reference, the steps, its ms per step and first-step seconds
    in each repeat), under the line that says what was timed."""
    repeats = len(rows[0]["ms_per_step"])
    lines = [f"toy1d 1-{HIDDEN}-1 tanh, full batch, {rows[0]['steps']} steps, 1 particle, medians of {repeats}, 1 thread",
             "", "| run | ms/step (median) | ms/step (each repeat) | first step s (median) | reference | "
             "ratio to its reference |", "|---|---|---|---|---|---|"]
    for row in rows:
        every = ", ".join(f"{t:.3f}" for t in row["ms_per_step"])
        lines.append(f"| {row['run']} | {statistics.median(row['ms_per_step']):.3f} | {every} | "
                     f"{statistics.median(row['first_step_s']):.3f} | {row['reference']} | {ratio(rows, row['run']):.2f} |")
    return "\n".join(lines)


def tables_from_csv(path: Path) -> str:
    """The table of a run from its ``--csv`` file alone (each time list comma-separated)."""
    rows = [{**row, **{key: [float(t) for t in str(row[key]).split(",")] for key in ("ms_per_step", "first_step_s")}}
            for row in read_rows(path)]
    return table(rows) + "\n"


if __name__ == "__main__":
    main()
