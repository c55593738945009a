r"""MC dropout under its paper's UCI protocol, as ``bnn uci`` runs it: Gal & Ghahramani's public experiment code
(yaringal/DropoutUncertaintyExps at commit 6eb4497, ``experiment.py`` and ``net/net.py``, the grid search that
replaced their Bayesian optimisation in 2018).

**Per split.** The dropout rate :math:`p` and the model precision :math:`\tau` (the Gaussian noise's precision, in
the target's original units) are searched jointly over the data set folder's ``dropout_rates.txt`` ×
``tau_values.txt`` on an 80/20 split of the training split, by validation log-likelihood; the best pair is refitted
on the whole training split and scored on the test split.

**Each fit** is their network's:

- one hidden layer of ReLU units, dropout at rate :math:`p` on the inputs of both layers (the data's inputs
  included), the noise held at :math:`\sigma = \tau^{-1/2}`;
- Adam at Keras's default rate :math:`10^{-3}` on minibatches of 128 rows for ten times the folder's
  ``n_epochs.txt`` epochs (400; protein 200), from Keras's initialisation (Glorot-uniform weights, zero biases).
  ``n_epochs.txt`` holds the passes of probabilistic backpropagation, whose splits these are; the paper's
  ``experiment.py`` trains ``n_epochs * 10`` of them (repository commit a6259f1) and its "10x epochs" update
  ``n_epochs * 100`` (``experiment_10x_epochs.py``; the grid-search code of 6eb4497 wrote its results as
  ``_100_xepochs``): ``--set mc-dropout.epochs=4000`` (protein 2000) runs that update;
- the weight decay :math:`\lambda \lVert W\rVert^2`, :math:`\lambda = l^2 (1-p) / (2 N \tau)` with length scale
  :math:`l = 10^{-2}`, added to the mean squared error of the standardised targets. This collection's objective
  (:mod:`bnn.inference.mc_dropout.fit`), times :math:`2\sigma_z^2` for the noise :math:`\sigma_z = 1/(s_y\sqrt\tau)`
  of the standardised targets (:math:`s_y` the training targets' standard deviation), is the mean squared error
  plus :math:`\sigma_z^2 \lVert W\rVert^2 / (N s^2 (1-p))` for a Gaussian prior of scale :math:`s` on the weights;
  the two agree at

  .. math::

      s = \frac{\sqrt 2}{l\, s_y\, (1 - p)},

  which :func:`paper_model` sets (9 to 600 on the six shipped sets: a weak pull; their code's :math:`\tau` is in
  the original units while the network fits standardised targets, hence :math:`s_y`). Their biases carry no decay;
  here they share the weights' prior, at that width a negligible pull;
- the predictive: :data:`PAPER_OPTIONS`'s 10,000 mask draws, the test log-likelihood of the mixture
  :math:`\log \frac1T \sum_t \mathcal{N}(y; \hat y_t, 1/\tau)` and the RMSE of the draws' mean, as theirs.

Deviations: the validation rows are a seeded random 20% of the training split (theirs: the split's last 20%, in
its index file's random order); Adam's :math:`\epsilon` is torch's :math:`10^{-8}` (Keras :math:`10^{-7}`). A folder
without ``tau_values.txt`` leaves the noise learned (searched over the rates alone), one without
``dropout_rates.txt`` searches :data:`DROPOUT_RATES`, one without ``n_epochs.txt`` counts :data:`PAPER_EPOCHS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnn.datasets.dataset import Dataset
from bnn.datasets.uci import read_whole_number
from bnn.inference.mc_dropout.options import MCDropoutOptions

DROPOUT_RATES = (0.005, 0.01, 0.05, 0.1)
"""The dropout rates tried when the data set folder has no ``dropout_rates.txt`` (the shipped sets' own grid)."""
PAPER_EPOCHS = 40
"""The ``n_epochs.txt`` of a folder without one (the papers' number for every set but protein)."""
EPOCH_MULTIPLIER = 10
"""The paper's code trains this many times ``n_epochs.txt``'s epochs (module notes)."""
LENGTH_SCALE = 1e-2
r""":math:`l`, the prior length scale of the paper's code."""
PAPER_OPTIONS = {"batch_size": 128, "lr": 1e-3, "weight_init": "glorot", "num_samples": 10_000}
"""The fit options of the paper's code: Keras's Adam on minibatches of 128 from Keras's initialisation, 10,000 draws
in the predictive."""
SELECTION = ("the paper's protocol: dropout rate and noise precision tau jointly over the folder's grid on a random "
             "{validation_fraction:.0%} of the training split (highest mean log-likelihood), then refit on the whole "
             "training split; their network, epochs and weight decay (bnn.inference.mc_dropout.uci_protocol)")
"""The cells' ``selection``: how their hyper-parameters were chosen."""


def _numbers(path: Path, what: str, low: float, high: float) -> list[float]:
    """The numbers ``path`` lists, each in the open interval ``(low, high)``.

    Raises
    ------
    ValueError
        For a file that lists none, a word that is not a number, or a number outside the interval.
    """
    try:
        values = [float(v) for v in path.read_text().split()]
    except ValueError as error:  # a word that is not a number
        raise ValueError(f"{path} must list {what} separated by spaces or lines ({error})") from None
    if not values or not all(low < value < high and math.isfinite(value) for value in values):
        raise ValueError(f"{path} must list {what}, got {values}")
    return values


def paper_grid(options: Mapping[str, Any], folder: Path) -> dict[str, list[float]]:
    """The candidates the cells of the data set in ``folder`` search jointly: ``dropout_rate`` from
    ``dropout_rates.txt`` (else :data:`DROPOUT_RATES`; none when the user fixed the rate) and ``noise_precision``
    (:math:`\\tau`, original units) from ``tau_values.txt`` (none without it: the noise is learned).

    Raises
    ------
    ValueError
        For a file that lists no value, a word that is not a number, a rate outside (0, 1) or a precision not positive.
    """
    grid = {}
    if "dropout_rate" not in options:
        path = folder / "dropout_rates.txt"
        grid["dropout_rate"] = (_numbers(path, "dropout rates in (0, 1)", 0, 1) if path.is_file()
                                else list(DROPOUT_RATES))
    if (folder / "tau_values.txt").is_file():
        grid["noise_precision"] = _numbers(folder / "tau_values.txt", "noise precisions tau > 0", 0, math.inf)
    return grid


def paper_epochs(options: Mapping[str, Any], folder: Path) -> dict[str, int]:
    """``{"epochs": n}``, :data:`EPOCH_MULTIPLIER` times the folder's ``n_epochs.txt`` (else :data:`PAPER_EPOCHS`),
    or nothing when the user set ``steps`` or ``epochs``.

    Raises
    ------
    ValueError
        For an ``n_epochs.txt`` that does not hold one positive whole number.
    """
    if "steps" in options or "epochs" in options:
        return {}
    path = folder / "n_epochs.txt"
    epochs = read_whole_number(path, "the training epochs") if path.is_file() else PAPER_EPOCHS
    return {"epochs": EPOCH_MULTIPLIER * epochs}


def paper_model(data: Dataset, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    r"""The prior and likelihood of the paper's network for a fit on the standardised ``data`` (module notes), and
    the fit options without ``noise_precision``.

    Returns
    -------
    settings : dict
        ``prior``: Gaussian of scale :math:`\sqrt 2 / (l s_y (1 - p))`; ``likelihood``: Gaussian of scale
        :math:`1 / (s_y \sqrt\tau)` in standardised units (learned without a ``noise_precision``).
    options : dict
        The fit options.
    """
    options = dict(options)
    tau = options.pop("noise_precision", None)
    target_scale = float(data.y_scaler.std.reshape(-1)[0])
    rate = options.get("dropout_rate", MCDropoutOptions.dropout_rate)
    prior_scale = math.sqrt(2) / (LENGTH_SCALE * target_scale * (1 - rate))
    noise = None if tau is None else 1 / (target_scale * math.sqrt(tau))
    return {"prior": {"name": "gaussian", "scale": prior_scale}, "likelihood": {"name": "gaussian", "scale": noise}}, options
