"""Narrow filters for the warnings arviz 0.23 raises on this stack, used where arviz is called.

Two kinds, nothing else is hidden:

* deprecations arviz triggers in its own dependencies (pandas 3's ``inplace`` in
  ``az.compare``, matplotlib 3.11's ``normalize_kwargs`` in every plot), which the user
  cannot act on;
* the LOO and WAIC reliability warnings, which the comparison table reports instead as
  the count of Pareto k > 0.7 and a ``waic_warning`` flag.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib import MatplotlibDeprecationWarning
from pandas.errors import Pandas4Warning

DEPRECATIONS = [
    (Pandas4Warning, r"The inplace keyword in DataFrame\.sort_values is deprecated"),
    (MatplotlibDeprecationWarning, r"Passing a dict or None as alias_mapping to normalize_kwargs"),
]
REPORTED_IN_THE_TABLE = [
    (UserWarning, r"Estimated shape parameter of Pareto distribution is greater than"),
    (UserWarning, r"For one or more samples the posterior variance of the log predictive densities exceeds"),
]


@contextmanager
def quiet_arviz(*, reported: bool = False) -> Iterator[None]:
    """Ignore arviz's dependency deprecations, and with ``reported`` its LOO/WAIC reliability warnings."""
    with warnings.catch_warnings():
        for category, message in DEPRECATIONS + (REPORTED_IN_THE_TABLE if reported else []):
            warnings.filterwarnings("ignore", message=message, category=category)
        yield
