r"""Shift sets: inputs a posterior should be unsure about, set beside in-distribution test inputs, by name.

- ``gap`` (toy1d): inputs in the gap between the two clusters of training inputs, :math:`[-0.3, 0.3]`, and beyond
  them, :math:`[-1.6, -1.1] \cup [1.1, 1.6]` (the in-between and outside uncertainty of Foong et al. 2019), on an
  even grid; the in-distribution set is the test split.
- ``farthest`` (any data set): the fifth of the test split farthest from the training inputs
  (:func:`~bnn.inference.evaluation.distance.nearest_training_distance` in standardised units) against the other
  four fifths: a covariate shift inside the data's own range, the one tabular data offer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.evaluation.distance import nearest_training_distance

from bnn.registry import Registry

FARTHEST_SHARE = 0.2
GAP_POINTS = 100


@dataclass(frozen=True)
class ShiftSplit:
    """In-distribution inputs ``x_in`` and shifted inputs ``x_out``, standardised as the data set's inputs are."""

    name: str
    x_in: torch.Tensor
    x_out: torch.Tensor


SHIFT_SETS: Registry[Callable[[Dataset], ShiftSplit]] = Registry("shift set")


@SHIFT_SETS.register("gap")
def gap_shift(dataset: Dataset) -> ShiftSplit:
    """The ``gap`` shift set of the module notes (toy1d only)."""
    if dataset.name != "toy1d":
        raise ValueError(f"shift set 'gap' is defined for toy1d, whose inputs have a gap; {dataset.name} has none: "
                         "use --ood farthest")
    quarter = GAP_POINTS // 4
    raw = torch.cat([torch.linspace(-1.6, -1.1, quarter), torch.linspace(-0.3, 0.3, GAP_POINTS - 2 * quarter),
                     torch.linspace(1.1, 1.6, quarter)]).unsqueeze(-1).to(dataset.x_test.dtype)
    return ShiftSplit("gap", dataset.x_test, dataset.x_scaler.transform(raw))


@SHIFT_SETS.register("farthest")
def farthest_shift(dataset: Dataset) -> ShiftSplit:
    """The ``farthest`` shift set of the module notes."""
    count = round(FARTHEST_SHARE * len(dataset.x_test))
    if count < 1 or count == len(dataset.x_test):
        raise ValueError(f"shift set 'farthest' splits the test split in fifths; {dataset.name} has "
                         f"{len(dataset.x_test)} test points, too few: use a larger test split")
    order = torch.argsort(nearest_training_distance(dataset.x_test, dataset.x_train), descending=True, stable=True)
    return ShiftSplit("farthest", dataset.x_test[order[count:]], dataset.x_test[order[:count]])


def shift_split(dataset: Dataset, name: str) -> ShiftSplit:
    """The shift set ``name`` of ``dataset``; ``ValueError`` names the choices or why it does not apply."""
    return SHIFT_SETS.get(name)(dataset)
