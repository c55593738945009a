r"""One NUTS chain as the engines and the chain runner see it: the job that goes in, the draws that come out.

A :class:`ChainJob` carries everything one chain needs (its seed, the sampler options, its start)
and pickles, so it travels to a worker process; an engine
(:data:`bnn.inference.nuts.engines.ENGINES`) turns it into :class:`ChainDraws`: the draws in the
constrained space and the per-draw sampler statistics of :func:`sampler_stats`, the same names
whichever engine ran the chain:

``diverging``
    The trajectory's energy error exceeded 1000: the sampler failed to explore a region
    (draws near it are biased).
``n_steps``
    Leapfrog steps (gradient evaluations) of the draw.
``tree_depth``
    :math:`\lfloor\log_2(\text{n\_steps})\rfloor + 1`, ArviZ's convention; ``max_tree_depth``
    means the trajectory reached the cap (and may have been cut off before it turned).
``step_size``
    The adapted :math:`\epsilon`.
``acceptance_rate``
    The mean over the trajectory of :math:`\min(1, e^{H(z_0, r_0) - H(z_i, r_i)})`.
``energy``
    The Hamiltonian at the start of the draw's trajectory, :math:`E_n = H(z_{n-1}, r_n) = U(z_{n-1}) + \tfrac{1}{2}
    r_n^\top M^{-1} r_n`: the previous draw's potential plus the kinetic energy of the fresh momentum
    :math:`r_n \sim \mathcal{N}(0, M)`, so :math:`E_n - U(z_{n-1}) \sim \tfrac{1}{2}\chi^2_d` exactly. ArviZ's
    ``plot_energy`` and ``bfmi`` read it: the energy Bayesian fraction of missing information

    .. math::

        \text{E-BFMI} = \frac{\sum_{n=2}^{N} (E_n - E_{n-1})^2}{\sum_{n=1}^{N} (E_n - \bar{E})^2}

    (Betancourt 2016) compares how far one momentum draw moves the energy with the spread of the energy; below
    0.3 the chain explores the energy's tails slowly. Stan's and nutpie's own ``energy`` is :math:`H` at the drawn
    point instead, which differs from :math:`E_n` by the draw's energy error (what the leapfrog integrator did not
    conserve): Pyro's NUTS keeps no momentum of the drawn point, the start is what both engines can give.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.nuts.potential import PotentialKind


class InitStrategy(str, Enum):
    """Where each chain starts (a mapping of site values is the third choice)."""

    PRIOR = "prior"
    """A draw from the prior, different for each chain."""
    MAP = "map"
    """The MAP of the weights and noise
    (:func:`~bnn.inference.map_search.map_estimate.map_weights`: Adam, then a polish) from a
    prior draw, per chain: chains start at different modes when the MAP fits find different ones."""


class Engine(str, Enum):
    """The NUTS implementation that runs each chain (same statistics, same ``Posterior``)."""

    NUTPIE = "nutpie"
    """nutpie's Rust NUTS on the compiled flat potential (:mod:`bnn.inference.nuts.engines.nutpie`), several
    times faster per gradient on the toy BNN (``benchmarks/results/nuts_speed.md``); ignores no option, but
    refuses ``dense_mass=True`` (no dense mass matrix) and ``num_warmup=0`` (it panics without adaptation)."""
    PYRO = "pyro"
    """Pyro's ``NUTS`` on the model's trace (:mod:`bnn.inference.nuts.engines.pyro`), the reference."""


@dataclass(frozen=True)
class ChainJob:
    """Everything one chain needs; picklable, so it can travel to a worker process."""

    chain: int
    seed: int
    num_warmup: int
    num_samples: int
    target_accept: float
    max_tree_depth: int
    dense_mass: bool
    init: InitStrategy | dict[str, torch.Tensor]  # a strategy, or constrained site values
    jit_compile: bool
    dtype: torch.dtype
    engine: Engine = Engine.PYRO
    potential: PotentialKind = PotentialKind.TRACE  # the nutpie engine's potential; Pyro's always reads the trace
    temperature: float = UNTEMPERED  # the likelihood's, bnn.inference.core.temperature
    whiten: bool = False  # the nutpie engine's chain in its Laplace approximation's coordinates (nuts.whitening)

    def worst_case_gradients(self) -> int:
        """The chain's gradients when every tree reaches the maximum depth (warm-up included)."""
        return full_depth_gradients(self.num_warmup + self.num_samples, self.max_tree_depth)


@dataclass(frozen=True)
class ChainDraws:
    """One chain's output: ``samples[site]`` of shape ``(draws, *site_shape)`` in the
    constrained space, ``stats[name]`` of shape ``(draws,)``, its wall time, its gradient
    evaluations (leapfrog steps, warmup included), and the backend of the nutpie engine's potential
    (:class:`~bnn.inference.nuts.potential.Backend`; ``None`` for Pyro's engine)."""

    samples: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    seconds: float
    gradients: int
    backend: str | None = None


def full_depth_gradients(iterations: int, max_tree_depth: int) -> int:
    """The gradients of ``iterations`` NUTS iterations whose trees all reach ``max_tree_depth``: :math:`2^d - 1` each."""
    return iterations * (2**max_tree_depth - 1)


def tree_depth(n_steps: np.ndarray) -> np.ndarray:
    r"""ArviZ's tree depth of each draw, :math:`\lfloor\log_2(\text{n\_steps})\rfloor + 1` (integers)."""
    return np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1


def sampler_stats(diverging: np.ndarray, n_steps: np.ndarray, step_size: np.ndarray,
                  acceptance_rate: np.ndarray, energy: np.ndarray) -> dict[str, np.ndarray]:
    """The ``sample_stats`` of one chain (see the module notes), one value per draw, from any engine."""
    return {
        "diverging": np.asarray(diverging, dtype=bool),
        "n_steps": np.asarray(n_steps, dtype=np.int64),
        "tree_depth": tree_depth(n_steps),
        "step_size": np.asarray(step_size, dtype=np.float64),
        "acceptance_rate": np.asarray(acceptance_rate, dtype=np.float64),
        "energy": np.asarray(energy, dtype=np.float64),
    }
