r"""Shift sets: inputs a posterior should be unsure about, set beside in-distribution test inputs, by name.

- ``gap`` (toy1d): inputs in the gap between the two clusters of training inputs, :math:`[-0.3, 0.3]`, and beyond
  them, :math:`[-1.6, -1.1] \cup [1.1, 1.6]` (the in-between and outside uncertainty of Foong et al. 2019), on an
  even grid; the in-distribution set is the test split.
- ``farthest`` (any data set): the fifth of the test split farthest from the training inputs
  (:func:`~bnn.inference.evaluation.distance.nearest_training_distance` in standardised units) against the other
  four fifths: a covariate shift inside the data's own range, the one tabular data offer.
- ``held-out-classes`` (multiclass): the highest :data:`HELD_OUT_SHARE` of the labels (digits and MNIST-1D: 8 and 9)
  are taken out of the training *and* test splits, so the fits never see them (the inputs are standardised by the
  remaining training rows); their test inputs are the shifted set, the test inputs of the other classes the
  in-distribution set. The only shift set that changes the data the fits learn from (:attr:`ShiftSplit.dataset`).
- ``noise`` (images: a data set with an ``input_shape``): each test image plus white Gaussian noise whose standard
  deviation is the spread of all training pixels, :math:`\tilde x = x + s\,\varepsilon`, :math:`\varepsilon \sim
  \mathcal{N}(0, I)` (signal-to-noise ratio about 1; seeded, :data:`NOISE_SEED`), against the clean test images.
- ``rotation`` (images): each test image turned by 90 degrees (a square 2-D image, ``torch.rot90``) or reversed (a
  1-D signal, whose only rotation-like map onto itself is the reversal of its axis), against the test images as
  they are.

Every shift set but ``held-out-classes`` keeps the data set as it is.
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
HELD_OUT_SHARE = 0.2
"""The share of a multiclass data set's labels (the highest ones) that ``held-out-classes`` holds out."""
NOISE_SEED = 0


@dataclass(frozen=True)
class ShiftSplit:
    """In-distribution inputs ``x_in`` and shifted inputs ``x_out``, standardised as ``dataset``'s inputs are;
    ``dataset`` is the data the fits learn from and are scored on (the data set itself, or for ``held-out-classes``
    the data set without the held-out classes)."""

    name: str
    x_in: torch.Tensor
    x_out: torch.Tensor
    dataset: Dataset


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
    return ShiftSplit("gap", dataset.x_test, dataset.x_scaler.transform(raw), dataset)


@SHIFT_SETS.register("farthest")
def farthest_shift(dataset: Dataset) -> ShiftSplit:
    """The ``farthest`` shift set of the module notes."""
    count = round(FARTHEST_SHARE * len(dataset.x_test))
    if count < 1 or count == len(dataset.x_test):
        raise ValueError(f"shift set 'farthest' splits the test split in fifths; {dataset.name} has "
                         f"{len(dataset.x_test)} test points, too few: use a larger test split")
    order = torch.argsort(nearest_training_distance(dataset.x_test, dataset.x_train), descending=True, stable=True)
    return ShiftSplit("farthest", dataset.x_test[order[count:]], dataset.x_test[order[:count]], dataset)


@SHIFT_SETS.register("held-out-classes")
def held_out_classes_shift(dataset: Dataset) -> ShiftSplit:
    """The ``held-out-classes`` shift set of the module notes (multiclass data sets of three classes or more)."""
    classes = dataset.out_features if dataset.task == "multiclass" else 2 if dataset.task == "binary" else 0
    held = max(1, round(HELD_OUT_SHARE * classes))
    if dataset.task == "regression" or classes - held < 2:
        raise ValueError(f"shift set 'held-out-classes' trains without some classes and needs at least two left; "
                         f"{dataset.name} is {'a regression' if classes == 0 else f'a {classes}-class'} data set: use "
                         "it on a multiclass set (digits, mnist1d), or --ood farthest")
    first_held = classes - held
    train_kept, test_kept = dataset.y_train < first_held, dataset.y_test < first_held
    raw = dataset.x_scaler.inverse
    kept = Dataset.from_arrays(
        f"{dataset.name} without class{'es' if held > 1 else ''} {', '.join(map(str, range(first_held, classes)))}",
        "multiclass", raw(dataset.x_train[train_kept]), dataset.y_train[train_kept], raw(dataset.x_test[test_kept]),
        dataset.y_test[test_kept], input_shape=dataset.input_shape)
    return ShiftSplit("held-out-classes", kept.x_test, kept.x_scaler.transform(raw(dataset.x_test[~test_kept])), kept)


def _images(dataset: Dataset, name: str) -> torch.Tensor:
    """The test images of ``dataset`` in their original units, ``(n, *input_shape)``; ``ValueError`` for tabular
    data."""
    if dataset.input_shape is None:
        raise ValueError(f"shift set {name!r} transforms images and {dataset.name} is tabular (no input_shape): use it "
                         "on an image-like data set (digits, mnist1d), or --ood farthest")
    return dataset.x_scaler.inverse(dataset.x_test).reshape(-1, *dataset.input_shape)


def _shifted_images(dataset: Dataset, name: str, images: torch.Tensor) -> ShiftSplit:
    return ShiftSplit(name, dataset.x_test, dataset.x_scaler.transform(images.flatten(1)), dataset)


@SHIFT_SETS.register("noise")
def noise_shift(dataset: Dataset) -> ShiftSplit:
    """The ``noise`` shift set of the module notes (image-like data sets)."""
    images = _images(dataset, "noise")
    spread = dataset.x_scaler.inverse(dataset.x_train).std()
    generator = torch.Generator().manual_seed(NOISE_SEED)
    noise = torch.randn(images.shape, generator=generator, dtype=images.dtype)
    return _shifted_images(dataset, "noise", images + spread * noise)


@SHIFT_SETS.register("rotation")
def rotation_shift(dataset: Dataset) -> ShiftSplit:
    """The ``rotation`` shift set of the module notes (1-D signals and square 2-D images)."""
    images = _images(dataset, "rotation")
    if len(dataset.input_shape) == 1:
        return _shifted_images(dataset, "rotation", images.flip(-1))
    if len(dataset.input_shape) != 2 or dataset.input_shape[0] != dataset.input_shape[1]:
        raise ValueError(f"shift set 'rotation' turns square 2-D images (or reverses 1-D signals) by 90 degrees; "
                         f"{dataset.name}'s inputs have shape {dataset.input_shape}: use --ood noise")
    return _shifted_images(dataset, "rotation", torch.rot90(images, 1, dims=(-2, -1)))


def shift_split(dataset: Dataset, name: str) -> ShiftSplit:
    """The shift set ``name`` of ``dataset``; ``ValueError`` names the choices or why it does not apply."""
    return SHIFT_SETS.get(name)(dataset)
