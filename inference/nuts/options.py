"""The options of a NUTS run, validated when they are built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from bnn.inference.core.device import DeviceOptions
from bnn.inference.core.temperature import UNTEMPERED, parse_temperature
from bnn.inference.nuts.chain import Engine, InitStrategy
from bnn.inference.nuts.chains import ChainMethod
from bnn.inference.nuts.engines import DEFAULT_ENGINE
from bnn.inference.nuts.whitening import Whitening

from bnn.options import choice, flag, integer, option, optional, probability, seed
from bnn.runtime import workers
from bnn.runtime.memory import parameter_count, value_bytes

MIN_SAMPLES = 4
"""Draws per chain at least: split R-hat and ESS need 4."""
MAX_TREE_DEPTH = 20
"""The deepest trajectory accepted: :math:`2^{20} - 1` leapfrog steps per draw is already far past any useful run."""


def initial_values(option_name: str, value: Any) -> InitStrategy | dict[str, Any]:
    """An :class:`InitStrategy` (or its string), or a mapping of site values (checked against the model later)."""
    if isinstance(value, Mapping):
        return dict(value)
    try:
        return InitStrategy(value)
    except ValueError:
        raise ValueError(f"unknown {option_name} {value!r}; choose from {[s.value for s in InitStrategy]} or give a "
                         "mapping of site values") from None


@dataclass(frozen=True)
class NUTSOptions(DeviceOptions):
    r"""Options of :func:`~bnn.inference.nuts.fit_nuts`.

    The defaults (300 warmup + 700 draws per chain, target acceptance 0.9, chains started at their own MAP points)
    pass the convergence check (no divergence, predictive R-hat at most 1.01) with a margin on every seed of the
    built-in toy1d data (chosen on the built-in data: ``benchmarks/results/nuts_defaults.md``).

    Attributes
    ----------
    num_warmup : int
        Adaptation iterations per chain, discarded (>= 0).
    num_samples : int
        Draws kept per chain (>= 4).
    num_chains : int, optional
        Independent chains (default ``min(2, cores)``); R-hat needs at least 2.
    target_accept : float
        Target of the step-size adaptation, in (0, 1); raise it (0.9, 0.95) against divergences.
    max_tree_depth : int
        Trajectories stop at :math:`2^{\text{max\_tree\_depth}} - 1` leapfrog steps (1 to ``MAX_TREE_DEPTH``).
    dense_mass : bool
        Adapt a dense mass matrix (captures correlations; :math:`O(d^2)` memory) instead of a diagonal.
    init : {"prior", "map"} or mapping
        See :class:`~bnn.inference.nuts.chain.InitStrategy`; or site values in the constrained space, each of the
        site's shape (all chains) or ``(num_chains, *site_shape)``; sites left out start from the prior. The default
        is ``"map"``, and ``"prior"`` for a network with hierarchical priors (a joint MAP collapses their scales).
    chain_method : {"auto", "parallel", "sequential"}
        See :class:`~bnn.inference.nuts.chains.ChainMethod`; all give the same draws. ``auto`` falls back to
        sequential chains (with a warning) where processes cannot work, ``parallel`` raises instead.
    jit_compile : bool
        Compile :math:`U`: Pyro traces it with the PyTorch JIT; the nutpie engine picks the flat
        potential's fastest working backend (see :class:`~bnn.inference.nuts.potential.Backend`), and
        without it evaluates the flat potential eagerly.
    engine : {"nutpie", "pyro"}
        See :class:`~bnn.inference.nuts.chain.Engine`; nutpie (the default when installed) refuses
        ``dense_mass=True`` and ``num_warmup=0``.
    temperature : float
        The likelihood temperature :math:`T`, 1 (Bayes' posterior) by default. The chains sample
        :math:`p(\mathcal{D} \mid W)^{1/T} p(W)` (:mod:`bnn.inference.core.temperature`), the nutpie engine on a torch
        backend of the flat potential (its compiled kernels are untempered).
    whiten : {"auto", "laplace", "none"}
        See :class:`~bnn.inference.nuts.whitening.Whitening`: ``laplace`` runs each nutpie chain in the whitened
        coordinates of the Laplace approximation at its MAP start (:mod:`bnn.inference.nuts.whitening`), which a
        posterior dominated by its data (as ill-conditioned as its Hessian) needs to keep its trees short; ``auto``
        does so on the flat potential of MAP-started chains with at most 1,000 latents and at least 10 rows per
        latent. The record says which ran (``whitened``).
    seed : int
        Seeds a generator that draws one seed per chain; the same seed gives the same draws,
        in processes or in sequence.
    progress : bool
        Show a tqdm bar per chain.
    """

    num_warmup: int = option(300, integer(minimum=0))
    num_samples: int = option(700, integer(minimum=MIN_SAMPLES))
    num_chains: int | None = option(None, optional(integer(minimum=1)))
    target_accept: float = option(0.9, probability)
    max_tree_depth: int = option(10, integer(minimum=1, maximum=MAX_TREE_DEPTH))
    dense_mass: bool = option(False, flag)
    init: InitStrategy | dict[str, Any] = option("map", initial_values)
    chain_method: ChainMethod = option("auto", choice(ChainMethod))
    jit_compile: bool = option(True, flag)
    engine: Engine = option(DEFAULT_ENGINE, choice(Engine))
    temperature: float = option(UNTEMPERED, parse_temperature)
    whiten: Whitening = option("auto", choice(Whitening))
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def chains(self) -> int:
        """The chains a fit of these options samples: ``num_chains``, or two where there are two cores."""
        return self.num_chains or min(2, workers.available_cores())

    def memory_needs(self, model) -> dict[str, int]:
        parameters, chains = parameter_count(model), self.chains()
        needs = {f"{chains} chains x {self.num_warmup + self.num_samples} draws (warmup included, float64)":
                 value_bytes(chains * (self.num_warmup + self.num_samples) * parameters, torch.float64)}
        if self.dense_mass:
            needs[f"{chains} dense mass matrices (D^2)"] = value_bytes(chains * parameters**2, torch.float64)
        return needs

    def check(self) -> None:
        if self.engine is Engine.NUTPIE and self.dense_mass:
            raise ValueError("the nutpie engine has no dense mass matrix; pass engine='pyro' or dense_mass=False")
        if self.whiten is Whitening.LAPLACE and self.engine is not Engine.NUTPIE:
            raise ValueError("whiten='laplace' is the nutpie engine's (Pyro's NUTS samples the trace's own coordinates); "
                             "pass engine='nutpie', or whiten='none' (dense_mass=True adapts to correlations there)")
        if self.whiten is Whitening.LAPLACE and self.init is not InitStrategy.MAP:
            raise ValueError("whiten='laplace' centres each chain's Laplace approximation at its MAP start; pass "
                             "init='map' (the default), or whiten='none'")
        if self.engine is Engine.NUTPIE and self.num_warmup == 0:
            raise ValueError("the nutpie engine needs num_warmup >= 1 (it panics without adaptation); pass engine='pyro'")
