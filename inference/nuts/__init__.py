"""The No-U-Turn sampler: Markov chains of the exact posterior (:func:`fit_nuts`), run by pluggable engines."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.method import Method
from bnn.inference.nuts.fit import (
    DEFAULT_ENGINE,
    ChainMethod,
    ConvergenceWarning,
    Engine,
    InitStrategy,
    SequentialChainsWarning,
    run_nuts,
)
from bnn.inference.nuts.options import NUTSOptions
from bnn.inference.nuts.outcomes import IncompleteSamplingWarning
from bnn.inference.nuts.record import NUTSRecord
from bnn.inference.posterior import Posterior

METHOD = Method("nuts", NUTSOptions, run_nuts)


def fit_nuts(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """NUTS on ``(x, y)`` with the options of :class:`NUTSOptions` (validated before any chain starts)."""
    return METHOD(model, x, y, **options)


__all__ = [
    "DEFAULT_ENGINE", "METHOD", "ChainMethod", "ConvergenceWarning", "Engine", "IncompleteSamplingWarning", "InitStrategy",
    "NUTSOptions", "NUTSRecord", "SequentialChainsWarning", "fit_nuts", "run_nuts",
]
