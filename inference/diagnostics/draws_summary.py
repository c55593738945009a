r"""``arviz.summary`` of a posterior's draws, without R-hat where there is a single chain.

R-hat compares the variance between chains with the variance within them,

.. math::

    \hat{R} = \sqrt{\frac{\frac{n-1}{n} W + \frac{1}{n} B}{W}},

so it needs two chains or more: SVI, Laplace, MC dropout and the ensemble give one "chain" of independent
draws, where ArviZ would log a shape-validation error and show ``NaN``. There the table has ArviZ's statistics
and its single-chain diagnostics (the Monte Carlo standard errors and effective sample sizes), computed the
way ArviZ computes them, and no ``r_hat`` column.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from bnn.runtime.lazy_arviz import az

if TYPE_CHECKING:  # pandas comes with arviz, at the first summary: importing the package does not load it
    import pandas as pd

ONE_CHAIN_DIAGNOSTICS = {
    "mean": {"mcse_mean": ("mcse", "mean"), "mcse_sd": ("mcse", "sd"), "ess_bulk": ("ess", "bulk"),
             "ess_tail": ("ess", "tail")},
    "median": {"mcse_median": ("mcse", "median"), "ess_median": ("ess", "median"), "ess_tail": ("ess", "tail")},
}
"""ArviZ's diagnostic columns but ``r_hat``, for each ``stat_focus``: column -> (arviz function, its ``method``)."""


def draws_summary(idata: az.InferenceData, **kwargs: Any) -> pd.DataFrame:
    """``arviz.summary(idata, **kwargs)``; with one chain, ``kind`` ``"all"`` or ``"diagnostics"`` give the
    diagnostics of :data:`ONE_CHAIN_DIAGNOSTICS` (before any ``stat_funcs`` of the caller) in place of
    ArviZ's, which include R-hat."""
    if idata.posterior.sizes["chain"] > 1:
        return az.summary(idata, **kwargs)
    kind = kwargs.pop("kind", "all")
    if kind not in ("all", "diagnostics"):
        return az.summary(idata, kind=kind, **kwargs)
    focus, extend = kwargs.get("stat_focus", "mean"), kwargs.pop("extend", True)
    if focus not in ONE_CHAIN_DIAGNOSTICS:
        raise ValueError(f"stat_focus must be one of {list(ONE_CHAIN_DIAGNOSTICS)}, got {focus!r}")
    own = kwargs.pop("stat_funcs", None) or {}
    own = own if isinstance(own, dict) else {function.__name__: function for function in own}
    diagnostics = {column: partial(getattr(az, function), method=method)
                   for column, (function, method) in ONE_CHAIN_DIAGNOSTICS[focus].items()}
    return az.summary(idata, kind="stats", stat_funcs={**diagnostics, **own},
                      extend=extend and kind == "all", **kwargs)
