"""ArviZ, imported at its first use and configured then.

The processes that never summarise, compare or save draws (the worker processes of chains, ensemble members and UCI
cells; a command that stops early) do not pay for its import, which brings xarray, scipy.stats and matplotlib with it.
:data:`az` stands for the module: the first attribute read through it (``az.ess``, ``az.InferenceData``) imports
arviz and, once,

* keeps arviz 0.23's announcement of its 1.x refactor (a ``FutureWarning``, once a day; 1.x needs Python >= 3.12 and is
  not used here) from the user, leaving the process's warning filters as they were;
* keeps arviz on its NumPy code paths: with numba installed (the NUTS kernel needs it) arviz 0.23 switches to numba
  ones, and its numba MCSE of one chain fails under numpy 2 ("only 0-dimensional arrays can be converted").
"""

from __future__ import annotations

import importlib
import threading
import warnings
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_loaded: list[ModuleType] = []


def load_arviz() -> ModuleType:
    """The arviz module, imported and configured (module notes) at the first call."""
    with _lock:
        if not _loaded:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
                module = importlib.import_module("arviz")
            module.Numba.disable_numba()
            _loaded.append(module)
    return _loaded[0]


class LazyArviz:
    """Stands for the arviz module: an attribute read imports it first (:func:`load_arviz`)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(load_arviz(), name)


az = LazyArviz()
"""Use as the arviz module (``az.summary(...)``)."""
