"""The ``stacklevel`` that makes a warning point at the user's line, however deep in the package it is raised."""

from __future__ import annotations

import sys


def user_stacklevel() -> int:
    """``warnings.warn``'s ``stacklevel`` for the first frame, going outwards from the caller, outside the ``bnn`` package.

    A frame belongs to the package when its module is ``bnn`` or ``bnn.*`` (the subpackages installed from other
    folders too), so the count does not depend on the path the call took: ``fit(...)`` and ``fit_laplace(...)`` reach
    the same warning through different numbers of frames.
    """
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "bnn":
        level, frame = level + 1, frame.f_back
    return level
