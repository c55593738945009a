"""One table of a few steps of every method: enough to run each method's code on a network, not to converge.

Tests that cross networks or data with every method take their options from :data:`QUICK`; a test of the collection's
integrity checks that it names every method in :data:`bnn.inference.METHODS`, so a new method gets a row here or the
suite fails.
"""

from __future__ import annotations

from bnn.inference import METHODS

QUICK: dict[str, dict[str, object]] = {
    "svi": {"steps": 30, "num_samples": 20},
    "nuts": {"num_warmup": 20, "num_samples": 10, "num_chains": 1, "init": "prior", "max_tree_depth": 4},
    "laplace": {"map_steps": 50, "num_samples": 20},
    "map": {"map_steps": 50},
    "mc-dropout": {"steps": 30, "num_samples": 10},
    "ensemble": {"num_members": 2, "map_steps": 50, "member_method": "sequential"},
    "sgld": {"num_warmup": 50, "num_samples": 10, "num_chains": 1},
    "sghmc": {"num_warmup": 50, "num_samples": 10, "num_chains": 1},
    "csgld": {"num_cycles": 2, "cycle_length": 50, "thin": 5, "num_chains": 1},
    "swag": {"map_steps": 50, "swag_epochs": 4, "rank": 2, "batch_size": 8, "num_samples": 5},
    "multiswag": {"map_steps": 50, "swag_epochs": 4, "rank": 2, "batch_size": 8, "num_samples": 5, "num_members": 2,
                  "member_method": "sequential"},
    "ivon": {"epochs": 3, "batch_size": 8, "num_samples": 10},
    "svgd": {"steps": 30, "num_samples": 10},
}
"""A few steps of each method, by name."""

SECONDS = {"nuts", "laplace", "map", "ensemble", "swag", "multiswag"}
"""The quick fits that take seconds (a MAP polish, NUTS's potential compiled): tests mark them ``long``."""


def any_network_methods() -> list[str]:
    """The methods that fit any network (they state no :attr:`~bnn.inference.core.method.Method.requires`)."""
    return [name for name in METHODS.names() if METHODS.get(name).requires is None]


def any_network_list() -> str:
    """:func:`any_network_methods` as a refusal names them: ``a, b or c``."""
    names = any_network_methods()
    return ", ".join(names[:-1]) + f" or {names[-1]}"
