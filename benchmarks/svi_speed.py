r"""Time per SVI step: the Bayes-by-Backprop guide through ``fit`` against a hand-written PyTorch loop.

Both fit the same network and data: a 1-50-1 tanh network on ``toy1d`` (100 points, full
batch), prior :math:`\mathcal{N}(0, 1)` on every weight, Gaussian likelihood with fixed
noise 0.1, :math:`q(w) = \mathcal{N}(\mu, \operatorname{softplus}(\rho)^2)` initialised
:math:`\mu` from the prior and :math:`\rho = -3`, the closed-form KL, one particle, Adam
with rate 0.01. The reference is a plain PyTorch loop with no Pyro in it, every formula
written out (the log-likelihood, the KL); a second plain loop writes the same step with
``torch.distributions`` (``Normal(...).rsample``, ``.log_prob``, ``kl_divergence``), the way
such loops are often written, and is timed alongside for comparison.

Runs alternate (reference, ``fit``, reference, ``fit``, ...) so both see the same machine
load, with ``torch.set_num_threads(1)``. The time per step leaves out the first step
(``JitTrace_ELBO`` compiles then; reported separately as "first step"), so a step time is
``(total - first step) / (steps - 1)``. A run's ratio divides its step time by the step
time of the reference run of the same repeat; the table shows median ratios, and the
last line printed is ``step_time_ratio=<x>``: the JIT-compiled meanfield ``fit`` against
the written-out reference (the line before it: against the ``torch.distributions`` loop).

Usage::

    python -m benchmarks.svi_speed [--steps 3000] [--repeats 3] [--context]

``--context`` adds rows for the same guide without JIT and for AutoNormal with JIT.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior
from torch.distributions import Normal, kl_divergence

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


def reference_loop(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int) -> tuple[float, float]:
    """Bayes by Backprop in plain PyTorch; return ``(first step seconds, seconds of the other steps)``."""
    torch.manual_seed(seed)
    shapes = [(HIDDEN, 1), (HIDDEN,), (1, HIDDEN), (1,)]
    sizes = [math.prod(shape) for shape in shapes]
    mu = (PRIOR_SCALE * torch.randn(sum(sizes))).requires_grad_()
    rho = torch.full((sum(sizes),), INIT_RHO, requires_grad=True)
    optimiser = torch.optim.Adam([mu, rho], lr=LR)
    log_norm = 0.5 * math.log(2 * math.pi) + math.log(NOISE)
    start = time.perf_counter()
    first = 0.0
    for step in range(steps):
        sigma = F.softplus(rho)
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
            first = time.perf_counter() - start
    return first, time.perf_counter() - start - first


def distributions_loop(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int) -> tuple[float, float]:
    """The same loop written with ``torch.distributions``; return ``(first step seconds, seconds of the other steps)``."""
    torch.manual_seed(seed)
    shapes = [(HIDDEN, 1), (HIDDEN,), (1, HIDDEN), (1,)]
    sizes = [math.prod(shape) for shape in shapes]
    mu = (PRIOR_SCALE * torch.randn(sum(sizes))).requires_grad_()
    rho = torch.full((sum(sizes),), INIT_RHO, requires_grad=True)
    optimiser = torch.optim.Adam([mu, rho], lr=LR)
    prior = Normal(torch.zeros(sum(sizes)), torch.full((sum(sizes),), PRIOR_SCALE))
    start = time.perf_counter()
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
            first = time.perf_counter() - start
    return first, time.perf_counter() - start - first


def pyro_fit(x: torch.Tensor, y: torch.Tensor, steps: int, seed: int, guide: str, jit: bool) -> tuple[float, float]:
    """The same fit through :func:`bnn.inference.fit`; return ``(first step seconds, seconds of the other steps)``."""
    options = {"init_rho": INIT_RHO} if guide == "meanfield" else {}
    posterior = fit(
        build_model(), (x, y), "svi", guide=guide, guide_options=options, steps=steps, lr=LR, jit=jit,
        num_samples=1, seed=seed, progress=False,
    )
    first = posterior.record.first_step_seconds
    return first, posterior.record.train_seconds - first


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.svi_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--context", action="store_true", help="also time meanfield without JIT and AutoNormal with JIT")
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
DISTRIBUTIONS = "pytorch BBB loop, torch.distributions"
MEANFIELD = "fit, meanfield guide, jit"


def _run(args: argparse.Namespace) -> float:
    data = load_toy1d()
    x, y = data.x_train, data.y_train
    runs = {
        REFERENCE: lambda seed: reference_loop(x, y, args.steps, seed),
        DISTRIBUTIONS: lambda seed: distributions_loop(x, y, args.steps, seed),
        MEANFIELD: lambda seed: pyro_fit(x, y, args.steps, seed, "meanfield", True),
    }
    if args.context:
        runs["fit, meanfield guide, no jit"] = lambda seed: pyro_fit(x, y, args.steps, seed, "meanfield", False)
        runs["fit, autonormal guide, jit"] = lambda seed: pyro_fit(x, y, args.steps, seed, "autonormal", True)
    step_ms: dict[str, list[float]] = {name: [] for name in runs}
    first_s: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(args.repeats):
        for name, run in runs.items():
            first, rest = run(repeat)
            first_s[name].append(first)
            step_ms[name].append(1000 * rest / (args.steps - 1))

    def ratio(name: str, to: str) -> float:
        return statistics.median(t / r for t, r in zip(step_ms[name], step_ms[to]))

    print(f"toy1d 1-{HIDDEN}-1 tanh, full batch, {args.steps} steps, 1 particle, medians of {args.repeats}, 1 thread")
    print()
    print("| run | ms/step (median) | ms/step (each repeat) | first step s (median) "
          "| ratio to reference | ratio to torch.distributions loop |")
    print("|---|---|---|---|---|---|")
    for name in runs:
        every = ", ".join(f"{t:.3f}" for t in step_ms[name])
        print(f"| {name} | {statistics.median(step_ms[name]):.3f} | {every} | {statistics.median(first_s[name]):.3f} "
              f"| {ratio(name, REFERENCE):.2f} | {ratio(name, DISTRIBUTIONS):.2f} |")
    print()
    print(f"step_time_ratio_to_distributions_loop={ratio(MEANFIELD, DISTRIBUTIONS):.3f}")
    print(f"step_time_ratio={ratio(MEANFIELD, REFERENCE):.3f}")
    return ratio(MEANFIELD, REFERENCE)


if __name__ == "__main__":
    main()
