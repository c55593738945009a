"""The dropout rates ``bnn uci`` chooses MC dropout's rate among, on a validation part of each training split."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

DROPOUT_RATES = (0.005, 0.01, 0.05, 0.1)
"""The dropout rates tried when the data set folder has no ``dropout_rates.txt`` (the shipped sets' own grid)."""


def dropout_rate_candidates(options: Mapping[str, Any], folder: Path) -> dict[str, list[float]]:
    """``{"dropout_rate": rates}`` from the folder's ``dropout_rates.txt`` (else :data:`DROPOUT_RATES`), or nothing
    when the user fixed the rate.

    Raises
    ------
    ValueError
        For a ``dropout_rates.txt`` that lists no rate, a word that is not a number, or a rate outside (0, 1).
    """
    if "dropout_rate" in options:
        return {}
    path = folder / "dropout_rates.txt"
    try:
        rates = [float(v) for v in path.read_text().split()] if path.is_file() else list(DROPOUT_RATES)
    except ValueError as error:  # a word that is not a number
        raise ValueError(f"{path} must list dropout rates in (0, 1) separated by spaces or lines ({error})") from None
    if not rates or not all(0 < rate < 1 for rate in rates):
        raise ValueError(f"{path} must list dropout rates in (0, 1), got {rates}")
    return {"dropout_rate": rates}
