"""The guide an SVI fit hands out: the fitted guide bound to the parameters the fit left it.

Pyro keeps a guide's parameters in one global parameter store, by name, and a guide reads them from there
when it runs: ``pyro.param("loc")`` in a hand-written guide, and a ``PyroModule`` (``AutoNormal``, the
mean-field guides) takes the store's value over its own whenever the store holds its name. A fit runs in a
store of its own, so after it the same name may hold anything: an unrelated fit's ``AutoNormal.locs.layers.0.weight``,
a value the user set, or nothing after ``pyro.clear_param_store()``. :class:`FittedGuide` keeps the fit's store
state and runs the guide inside it on every call, so ``Predictive(model, guide=posterior.extras["guide"])``
gives the fit's own numbers whatever the global store holds, and leaves that store as it found it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyro


class FittedGuide:
    """A guide that runs in its fit's own parameter store.

    Parameters
    ----------
    guide : callable
        The fitted guide, with the model's signature.
    param_state : dict
        Its parameters, the state of the fit's store (``pyro.get_param_store().get_state()``: ``"params"`` and
        ``"constraints"`` by name).

    Notes
    -----
    Attributes other than ``guide`` and ``param_state`` are the fitted guide's own (``site_loc_scale()``,
    ``locs``, ``median()``, ...): read outside a call they give the fit's values, since a ``PyroModule`` reads
    its own parameters there. Code that runs the guide in other ways (``elbo_pair()``'s guide, a hand-written
    loss) runs it in the global store: wrap it in :meth:`own_parameters`.
    """

    def __init__(self, guide: Callable, param_state: dict[str, dict[str, Any]]) -> None:
        self.guide = guide
        self.param_state = param_state

    @contextmanager
    def own_parameters(self) -> Iterator[None]:
        """Make the fit's parameters the global store's contents inside the block; restore the store after it."""
        with pyro.get_param_store().scope(state=self.param_state):
            yield

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the guide in its own parameters (:meth:`own_parameters`)."""
        with self.own_parameters():
            return self.guide(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("guide", "param_state"):  # not set yet (an unpickled or half-built object)
            raise AttributeError(name)
        return getattr(self.guide, name)

    def __repr__(self) -> str:
        return f"FittedGuide({self.guide!r})"
