"""An inference method as the collection registers it: a name, a typed option set and the function that runs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.core.posterior import Posterior

from bnn.options import Options
from bnn.runtime.memory import check_memory, network_needs


@dataclass(frozen=True)
class Method:
    """One inference method.

    Attributes
    ----------
    name : str
        The name ``fit(..., method=name)`` and the command line take.
    options : type of Options
        Its option set; building it validates every option before any work starts.
    run : callable
        ``run(model, x, y, options) -> Posterior`` on validated training tensors.
    """

    name: str
    options: type[Options]
    run: Callable[[Any, torch.Tensor, torch.Tensor, Options], Posterior]

    def __call__(self, model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
        """Parse ``options`` (``ValueError`` for unknown or bad ones), check that the machine has the memory the fit
        needs (:mod:`bnn.runtime.memory`; ``ValueError`` with the numbers), then run on a copy of ``model``
        (:func:`~bnn.inference.core.model_snapshot.snapshot_model`: changing ``model`` later leaves the fit alone)."""
        parsed = self.options.parse(self.name, options)
        check_memory(self.name, {**network_needs(model, x.shape[0]), **parsed.memory_needs(model)})
        return self.run(snapshot_model(model), x, y, parsed)
