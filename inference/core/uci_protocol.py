"""What ``bnn uci`` needs to know of a method to run it under the papers' protocol (:mod:`bnn.experiments.uci.protocol`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def one_core(options: Mapping[str, Any]) -> int:
    """A method that runs in one process."""
    return 1


@dataclass(frozen=True)
class UCIProtocol:
    """A method's settings under the UCI protocol.

    Attributes
    ----------
    options : mapping
        Fit options the protocol sets (the user's ``--set`` wins).
    selection : str, optional
        How the method's hyper-parameters are chosen, for the results table (``{validation_fraction}`` is filled in);
        ``None``: fixed, the method's defaults.
    validation : callable, optional
        ``validation(options, folder) -> {option: candidates}``: options chosen jointly (every combination) on a
        validation part of each training split, from the data set's ``folder`` (empty when the user fixed them);
        ``None``: none.
    folder_options : callable, optional
        ``folder_options(options, folder) -> options``: fit options read from the data set's ``folder`` (under the
        user's ``--set``, which ``options`` holds); ``None``: none.
    model_settings : callable, optional
        ``model_settings(data, options) -> (settings, options)``: the network's prior and likelihood (keywords of
        the papers' network) for a fit on the standardised ``data`` with ``options``, and those options without the
        model's own hyper-parameters (candidates of ``validation`` that are not fit options); ``None``: the papers'
        N(0, 1) prior and learned noise, the options as they are.
    cores : callable
        ``cores(options) -> int``: the cores one cell keeps busy.
    reproduces : str, optional
        The published method whose protocol this one follows (a key of ``bnn.experiments.uci.published.REPRODUCED``):
        the table sets its rows against that method's published numbers.
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    selection: str | None = None
    validation: Callable[[Mapping[str, Any], Path], dict[str, list[float]]] | None = None
    folder_options: Callable[[Mapping[str, Any], Path], dict[str, Any]] | None = None
    model_settings: Callable[[Any, Mapping[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None = None
    # a factory, so that the class holds no function attribute that documentation tools would read as a method
    cores: Callable[[Mapping[str, Any]], int] = field(default_factory=lambda: one_core)
    reproduces: str | None = None
