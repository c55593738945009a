"""The NUTS engines: each runs one chain of a :class:`~bnn.inference.nuts.chain.ChainJob` and returns its draws.

An engine is a function ``run_chain(model, x, y, job, report) -> ChainDraws`` that calls
``report((chain, stage, n_steps))`` after each iteration (``stage`` is "Warmup" or "Sample") and
lets the exceptions ``report`` raises stop it; :data:`ENGINES` maps each
:class:`~bnn.inference.nuts.chain.Engine` to its function. Validation, seeds, processes, progress
and diagnostics do not depend on the engine, so another sampler is one more entry here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from bnn.inference.nuts.chain import Engine
from bnn.inference.nuts.engines import pyro as pyro_engine

ENGINES: dict[Engine, Callable] = {Engine.PYRO: pyro_engine.run_chain}
"""The ``run_chain`` of each installed engine; the chain runner looks the engine up here at every chain."""



def nutpie_run_chain(*args, **kwargs) -> object:
    """The nutpie engine's ``run_chain`` (:mod:`bnn.inference.nuts.engines.nutpie`), imported at the first chain: nutpie
    imports arviz, which a process that runs no chain need not import (:mod:`bnn.runtime.lazy_arviz`)."""
    from bnn.inference.nuts.engines import nutpie as nutpie_engine

    return nutpie_engine.run_chain(*args, **kwargs)


if importlib.util.find_spec("nutpie") is not None:  # a pinned dependency, but the Pyro engine runs without it
    ENGINES[Engine.NUTPIE] = nutpie_run_chain

DEFAULT_ENGINE = Engine.NUTPIE if Engine.NUTPIE in ENGINES else Engine.PYRO

__all__ = ["DEFAULT_ENGINE", "ENGINES"]
