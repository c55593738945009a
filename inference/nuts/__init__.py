"""The No-U-Turn sampler: Markov chains of the exact posterior (:func:`fit_nuts`), run by pluggable engines.

The modules, one concept each: :mod:`~bnn.inference.nuts.fit` (the method: seeds, starts, diagnostics, the record),
:mod:`~bnn.inference.nuts.options` and :mod:`~bnn.inference.nuts.record` (its typed options and record),
:mod:`~bnn.inference.nuts.chains` (running the chains in processes or in sequence),
:mod:`~bnn.inference.nuts.chain` (one chain's job and draws), :mod:`~bnn.inference.nuts.engines` (the samplers
that run a chain), :mod:`~bnn.inference.nuts.outcomes` (what survives faults) and
:mod:`~bnn.inference.nuts.potential` (the flat potential).
"""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import for_hierarchical
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.diagnostics.convergence import ConvergenceWarning, IncompleteSamplingWarning
from bnn.inference.nuts.chain import Engine, InitStrategy
from bnn.inference.nuts.chains import ChainMethod, SequentialChainsWarning
from bnn.inference.nuts.cost import COST
from bnn.inference.nuts.engines import DEFAULT_ENGINE
from bnn.inference.nuts.fit import run_nuts
from bnn.inference.nuts.options import NUTSOptions
from bnn.inference.nuts.record import NUTSRecord

UCI_CHAINS = 4
"""The chains of a ``bnn uci`` cell, each from its own MAP start, pooled into one posterior (the user's ``--set
nuts.num_chains`` wins). On the UCI sets the chains settle in different modes; pooled, they are the many-start practice
of Izmailov et al. (2021), and the cell records how far they agree at each test input
(:mod:`bnn.inference.diagnostics.point_agreement`). Four, as Stan and ArviZ run by default; more chains than two
widen the pooled predictive where the modes disagree, which two chains leave far too narrow on yacht
(``benchmarks/results/uci.md``). With fewer cores than chains, the chains queue."""

# compare keeps fit's defaults for NUTS, the maximum tree depth of 10 included: a shallower tree diverges on toy1d
# (benchmarks/results/nuts_defaults.md)
METHOD = Method(
    "nuts", NUTSOptions, run_nuts, NUTSRecord, cost=COST, budget_floors={"num_warmup": 100, "num_samples": 100},
    advice="raise --num-warmup and --num-samples (1000 each), run more chains (--num-chains 4), raise --target-accept "
           "(fewer divergences).",
    uci=UCIProtocol(options={"num_chains": UCI_CHAINS},
                    selection=f"posterior: weights and noise scale sampled, {UCI_CHAINS} chains from MAP starts pooled; "
                              "prior N(0, 1) fixed",
                    cores=lambda options: options.get("num_chains") or UCI_CHAINS),
    # a joint MAP over weights and their latent scales collapses the scales: those chains start from the prior
    model_defaults=for_hierarchical({"init": "prior"}),
    cpu_only="its chains run in CPU worker processes, on a compiled CPU kernel where the network has one",
)


def fit_nuts(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """NUTS on ``(x, y)`` with the options of :class:`NUTSOptions` (validated before any chain starts)."""
    return METHOD(model, x, y, **options)


__all__ = [
    "DEFAULT_ENGINE", "METHOD", "ChainMethod", "ConvergenceWarning", "Engine", "IncompleteSamplingWarning", "InitStrategy",
    "NUTSOptions", "NUTSRecord", "SequentialChainsWarning", "fit_nuts", "run_nuts",
]
