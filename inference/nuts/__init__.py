"""The No-U-Turn sampler: Markov chains of the exact posterior (:func:`fit_nuts`), run by pluggable engines.

The modules, one concept each: :mod:`~bnn.inference.nuts.fit` (the method: options, seeds, diagnostics),
:mod:`~bnn.inference.nuts.chains` (running the chains in processes or in sequence),
:mod:`~bnn.inference.nuts.chain` (one chain's job and draws), :mod:`~bnn.inference.nuts.engines` (the samplers
that run a chain), :mod:`~bnn.inference.nuts.outcomes` (what survives faults) and
:mod:`~bnn.inference.nuts.potential` (the flat potential).
"""

from bnn.inference.nuts.chain import Engine, InitStrategy
from bnn.inference.nuts.chains import ChainMethod, SequentialChainsWarning
from bnn.inference.nuts.engines import DEFAULT_ENGINE
from bnn.inference.nuts.fit import ConvergenceWarning, fit_nuts
from bnn.inference.nuts.outcomes import IncompleteSamplingWarning

__all__ = [
    "DEFAULT_ENGINE",
    "ChainMethod",
    "ConvergenceWarning",
    "Engine",
    "IncompleteSamplingWarning",
    "InitStrategy",
    "SequentialChainsWarning",
    "fit_nuts",
]
