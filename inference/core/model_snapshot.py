"""The model a fit works on: a copy taken when the fit starts, so that later changes to the user's model
(``model.prior = "laplace"``) do not reach a fit already made.

Every method runs on the copy, and its :class:`~bnn.inference.core.posterior.Posterior` (``posterior.model``, its
``config()``, what ``save`` writes, ``compare``'s table) and its guide hold it. The copy is deep
(:func:`copy.deepcopy`): a :class:`~bnn.models.network.BayesianNetwork` holds a few small objects (sites, priors, a likelihood),
so it costs a fraction of a millisecond. A model holding something that cannot be deep-copied (a lock, an open
file, a tensor inside an autograd graph) is copied shallowly instead: a new model object that shares those
attributes' objects. Assigning its attributes (``model.prior = ...``, ``model.likelihood = ...``) still leaves
the fit alone; changing an object the two share in place (``model.my_table[0] = ...``) reaches the fit too.
"""

from __future__ import annotations

import copy
from typing import TypeVar

Model = TypeVar("Model")


def snapshot_model(model: Model) -> Model:
    """A copy of ``model`` that later changes to ``model`` do not reach: deep, else shallow (see the module notes).

    Raises
    ------
    ValueError
        When ``model`` cannot be copied even shallowly (its class refuses ``copy.copy``), naming the error.
    """
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - deepcopy raises TypeError for locks and files, RuntimeError for graph tensors
        try:
            return copy.copy(model)
        except Exception as error:  # noqa: BLE001 - a class's own __copy__ or __reduce_ex__ may raise anything
            raise ValueError(f"the model cannot be copied ({type(error).__name__}: {error}); a fit keeps a copy of "
                             "the model as it was fitted: give its class a __copy__ or __deepcopy__ that works") from error
