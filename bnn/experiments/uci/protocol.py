r"""The papers' protocol for one cell of the grid, and how each method's hyper-parameters are chosen.

Hernández-Lobato & Adams (2015), Gal & Ghahramani (2016) and Lakshminarayanan et al. (2017): one hidden layer of
50 ReLU units (100 for protein: the folder's ``n_hidden.txt``), inputs and target standardised with the training
split's mean and standard deviation, and on the test split

.. math::

    \mathrm{RMSE} = s_y \sqrt{\tfrac{1}{n}\textstyle\sum_i (\hat y_i - y_i)^2}, \qquad
    \mathrm{LL} = \tfrac{1}{n}\textstyle\sum_i \log p(y_i \mid x_i, \mathcal{D}) - \log s_y,

both in the target's original units (:math:`s_y` its training standard deviation). The prior is
:math:`\mathcal{N}(0, 1)` on every weight in standardised units and the noise scale is learned. Nothing is chosen
on the test split: each method's protocol (:attr:`~bnn.inference.core.method.Method.uci`) says what chooses its
hyper-parameters.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from typing import Any

import numpy as np

from bnn.datasets.dataset import Dataset
from bnn.datasets.uci import UCITable
from bnn.experiments.uci.advice import cell_problems
from bnn.experiments.uci.grid import Cell
from bnn.inference.diagnostics import point_agreement
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.evaluation.set_coverage import carve_calibration, set_coverage
from bnn.inference.fit import METHODS, fit
from bnn.models import BayesianMLP
from bnn.runtime.workers import one_torch_thread

ACTIVATION = "relu"
LEARNED_NOISE = {"name": "gaussian", "scale": None}
VALIDATION_FRACTION = 0.2
"""The share of a training split held out to choose hyper-parameters on (the papers' choice)."""
FIXED = "fixed: the method's defaults; prior N(0, 1), noise scale learned by the fit"
"""The selection of a method whose protocol states none, and of a validated option the user fixed."""
COLUMNS = ("dataset", "method", "split", "status", "rmse", "test_ll", "seconds", "verdict", "selection", "chosen",
           "problems", "attempts")
"""The fields of a cell's result, in the order of ``results.csv``. ``status`` is ``ok`` or ``failed``; ``attempts``
is the number of tries of a failed cell (1 + Ray's retries) and 1 for a finished one (Ray does not say how many tries a
success took); ``problems`` holds the method's own warnings, or a failed cell's error."""
CALIBRATION_COLUMNS = ("crps", "pit_calibration_error")
"""The calibration of a finished cell (:mod:`bnn.inference.evaluation.calibration`): the mean CRPS in the target's
units and the PIT's quantile calibration error. Cells written before they were measured lack them (empty in
``results.csv``), so a cell file need not hold them."""
CONFORMAL_COLUMNS = ("conformal_coverage", "conformal_width")
"""With a calibration share (``bnn uci --conformal SHARE``, :func:`conformal_measures`): the test coverage of the 90%
split-conformal intervals and their mean width in the target's units; empty in ``results.csv`` otherwise."""
ONE_PROCESS = {"member_method": "sequential"}
"""How a cell's fit runs where its method would choose by the machine's cores: a method's members (ensemble, SWAG,
MultiSWAG) one after another in the cell's own process, so that a cell keeps to the one core its protocol declares
(:attr:`~bnn.inference.core.uci_protocol.UCIProtocol.cores`): ``--workers 1`` runs one process, and Ray reserves
the core it uses. ``--set <method>.member_method=parallel`` runs them in processes. Not in a cell's options, so not in
its fingerprint: it decides where the members run, not their numbers."""
AGREEMENT_COLUMNS = point_agreement.AGREEMENT_COLUMNS
"""A run of two or more chains (NUTS, SG-MCMC): the largest predictive R-hat over the test inputs and the share of
them within 1.1 and 1.01 (:mod:`bnn.inference.diagnostics.point_agreement`); empty for the other methods and for cells
written before they were measured."""


def selection(method: str, validation: dict[str, list[float]], set_by_user: dict[str, Any] | None = None) -> str:
    """How ``method``'s hyper-parameters are chosen in a run that validates ``validation``, naming the options the
    user set (``set_by_user``, from ``--set``)."""
    protocol = METHODS.get(method).uci
    validated = protocol.validation is None or bool(validation)
    chosen_by = protocol.selection.format(validation_fraction=VALIDATION_FRACTION) if protocol.selection and validated else FIXED
    if not set_by_user:
        return chosen_by
    return f"{chosen_by}; except these, set by the user: " + ", ".join(f"{name}={value}" for name, value in set_by_user.items())


def uci_model(in_features: int, hidden: int, prior: Any = "gaussian",
              likelihood: Any = LEARNED_NOISE) -> BayesianMLP:
    """The papers' network: one hidden layer of ``hidden`` ReLU units, by default N(0, 1) priors and a learned
    noise scale (a method's protocol may set others: :attr:`~bnn.inference.core.uci_protocol.UCIProtocol.model_settings`)."""
    return BayesianMLP(in_features, 1, hidden=(hidden,), activation=ACTIVATION, prior=prior, likelihood=likelihood)


def fit_cell(method: str, data: Dataset, hidden: int, options: dict[str, Any]):
    """``method`` fitted on ``data`` with ``options`` (candidates of its validation grid among them): on the papers'
    network with the prior and likelihood its protocol sets, if any, and in one process
    (:data:`ONE_PROCESS`, which ``options`` override)."""
    settings = METHODS.get(method).uci.model_settings
    taken = METHODS.get(method).options.names()
    options = {**{name: value for name, value in ONE_PROCESS.items() if name in taken}, **options}
    network, options = ({}, options) if settings is None else settings(data, options)
    return fit(uci_model(data.in_features, hidden, **network), data, method=method, **options)


def validation_part(table: UCITable, split: int, seed: int) -> Dataset:
    """A random :data:`VALIDATION_FRACTION` of split ``split``'s training rows as the test part, the rest to train on
    (standardised with the rest's statistics); the test rows are not touched."""
    x, y, _, _ = table.arrays(split)
    order = np.random.default_rng(seed).permutation(len(y))
    held = max(1, round(VALIDATION_FRACTION * len(y)))
    train, valid = order[held:], order[:held]
    return Dataset.from_arrays(f"{table.name}-validation", "regression", x[train], y[train], x[valid], y[valid])


def choose_on_validation(table: UCITable, cell: Cell) -> dict[str, float]:
    """The combination of ``cell.validation``'s candidates (every one, a grid search) with the highest mean
    validation log-likelihood, the other options at ``cell.options``; the first such on a tie.

    Raises
    ------
    FloatingPointError
        When no combination's validation log-likelihood is finite.
    """
    data = validation_part(table, cell.split, cell.options.get("seed", 0))
    best, best_score = None, -math.inf
    for values in itertools.product(*cell.validation.values()):
        candidate = dict(zip(cell.validation, values))
        score = evaluate(fit_cell(cell.method, data, cell.hidden, {**cell.options, **candidate}), data)["test_ll"]
        if math.isfinite(score) and score > best_score:
            best, best_score = candidate, score
    if best is None:
        raise FloatingPointError(f"{cell.name}: no candidate of {cell.validation} gave a finite validation log-likelihood")
    return best


def conformal_measures(cell: Cell, data: Dataset, chosen: dict[str, Any]) -> dict[str, float | None]:
    r""":data:`CONFORMAL_COLUMNS` of ``cell`` on split ``data`` (``None`` each without ``cell.conformal``).

    The papers' fit uses the whole training split, which leaves no row to calibrate on, so a second fit of the same
    method and options (``chosen`` included) runs on a seeded :math:`1 - s` of it
    (:func:`~bnn.inference.evaluation.set_coverage.carve_calibration`, :math:`s` = ``cell.conformal``); the other
    :math:`s` calibrates its split-conformal 90% intervals (:mod:`bnn.inference.evaluation.conformal`), scored on the
    test split. The cell's RMSE, log-likelihood and calibration stay those of the papers' fit."""
    if cell.conformal is None:
        return dict.fromkeys(CONFORMAL_COLUMNS)
    fitted, calibration = carve_calibration(data, cell.conformal, cell.options.get("seed", 0))
    posterior = fit_cell(cell.method, fitted, cell.hidden, {**cell.options, **chosen})
    coverage = set_coverage(posterior, data, calibration)
    return {column: coverage[column] for column in CONFORMAL_COLUMNS}


def verdict(record) -> str:
    """The method's own check on its fit: ``converged``, ``not converged`` or ``no check``."""
    return {True: "converged", False: "not converged", None: "no check"}[record.converged]


def run_cell(table: UCITable, cell: Cell) -> dict[str, Any]:
    """Fit ``cell.method`` on split ``cell.split`` of ``table`` under the protocol (module notes) and score it.

    Runs on one torch thread (the same arithmetic in every process, so the same numbers); the warnings its fit (and
    its conformal fit) raise go into the result's ``problems`` (a worker's warnings would be lost), but for torch's
    deprecation notices, with the record's problems, each once and in ``bnn uci``'s terms
    (:func:`~bnn.experiments.uci.advice.cell_problems`); the warnings of the validation grid's candidate fits do not:
    they chose the options, and the cell reports the fit it scores.

    Raises
    ------
    FloatingPointError
        For a test RMSE or log-likelihood that is not finite.
    """
    began = time.perf_counter()
    with one_torch_thread(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # torch's notices about its own API (its first forward-mode jvp imports a module that calls torch.jit.script)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.")
        with warnings.catch_warnings(record=True):  # kept apart: the cell reports the fit it scores
            chosen = choose_on_validation(table, cell) if cell.validation else {}
        data = table.split(cell.split)
        posterior = fit_cell(cell.method, data, cell.hidden, {**cell.options, **chosen})
        metrics = evaluate(posterior, data)
        agreement = point_agreement.agreement_at_inputs(posterior, data.x_test)
        conformal = conformal_measures(cell, data, chosen)
    if not (math.isfinite(metrics["test_rmse"]) and math.isfinite(metrics["test_ll"])):
        raise FloatingPointError(f"{cell.name}: test RMSE {metrics['test_rmse']}, log-likelihood {metrics['test_ll']}")
    problems = cell_problems(cell.method, posterior, [str(w.message) for w in caught])
    return {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "status": "ok",
            "rmse": metrics["test_rmse"], "test_ll": metrics["test_ll"], "seconds": time.perf_counter() - began,
            **{column: metrics[column] for column in CALIBRATION_COLUMNS}, **conformal, **agreement,
            "verdict": verdict(posterior.record), "selection": selection(cell.method, cell.validation, cell.set_by_user),
            "chosen": ", ".join(f"{k}={v}" for k, v in chosen.items()), "problems": "; ".join(problems), "attempts": 1}


def failed_row(cell: Cell, reason: str, attempts: int) -> dict[str, Any]:
    """The result of a cell that failed ``attempts`` times, the last for ``reason``."""
    return {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "status": "failed", "rmse": None,
            "test_ll": None, "seconds": None, "verdict": "failed",
            "selection": selection(cell.method, cell.validation, cell.set_by_user), "chosen": "", "problems": reason,
            "attempts": attempts, **dict.fromkeys(CALIBRATION_COLUMNS), **dict.fromkeys(CONFORMAL_COLUMNS),
            **dict.fromkeys(AGREEMENT_COLUMNS)}
