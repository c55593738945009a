"""A train/test data set, standardised with training statistics, that knows its task."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.datasets.standardize import Standardizer
from bnn.datasets.validation import check_inputs_targets

TASKS = ("regression", "binary", "multiclass")


@dataclass(frozen=True)
class Dataset:
    """Standardised train and test arrays plus what is needed to undo the scaling.

    Attributes
    ----------
    name : str
        Short name used in run names and reports.
    task : str
        ``"regression"``, ``"binary"`` or ``"multiclass"``.
    x_train, y_train, x_test, y_test : torch.Tensor
        Inputs standardised with the training split's statistics; regression targets too,
        classification labels as given.
    x_scaler, y_scaler : Standardizer
        The statistics; ``y_scaler`` is the identity for classification.
    input_shape : tuple of int or None
        The layout of one row when the columns are a signal ``(length,)`` or an image ``(height, width)`` (what a
        :class:`~bnn.models.cnn.BayesianCNN` reads); ``None`` for tabular columns.
    """

    name: str
    task: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    x_scaler: Standardizer
    y_scaler: Standardizer
    input_shape: tuple[int, ...] | None = None

    @classmethod
    def from_arrays(cls, name: str, task: str, x_train, y_train, x_test, y_test, *,
                    input_shape: tuple[int, ...] | None = None) -> Dataset:
        """Validate raw arrays, then standardise inputs (and regression targets) with training statistics, computed
        in float64 and stored in torch's default dtype.

        Raises
        ------
        ValueError
            For bad arrays (:func:`~bnn.datasets.validation.check_inputs_targets`), an unknown task, a single training
            row (no spread to standardise by), a constant regression target (zero variance: nothing to learn) or an
            ``input_shape`` whose product is not the number of features.
        """
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; choose from {list(TASKS)}")
        x_train, y_train = check_inputs_targets(x_train, y_train)
        x_test, y_test = check_inputs_targets(x_test, y_test)
        if x_test.shape[1] != x_train.shape[1]:
            raise ValueError(f"test inputs have {x_test.shape[1]} features, training inputs {x_train.shape[1]}")
        if input_shape is not None:
            input_shape = tuple(input_shape)
            if math.prod(input_shape) != x_train.shape[1]:
                raise ValueError(f"input_shape {input_shape} holds {math.prod(input_shape)} values per row but data set "
                                 f"{name!r} has {x_train.shape[1]} features: give a shape whose product is the features")
        if x_train.shape[0] < 2:
            raise ValueError(f"data set {name!r} has a single training row: it cannot be standardised (a standard "
                             "deviation needs two rows) and a fit would learn nothing; give more training rows")
        dtype, work = x_train.dtype, torch.float64  # y is float64 already
        x_scaler = Standardizer.fit(x_train.to(work))
        x_train, x_test = (x_scaler.transform(x.to(work)).to(dtype) for x in (x_train, x_test))
        if task == "regression":
            if bool((y_train == y_train[0]).all()):
                raise ValueError(f"data set {name!r} has a constant regression target ({y_train[0].item()} in every "
                                 "training row): zero variance, nothing to learn; check the target column")
            y_scaler = Standardizer.fit(y_train)
            y_train, y_test = (y_scaler.transform(y).to(dtype) for y in (y_train, y_test))
            y_scaler = y_scaler.to(dtype)
        else:  # labels stay exact float64 until the likelihood checks and casts them
            y_scaler = Standardizer.identity(y_train)
        return cls(name, task, x_train, y_train, x_test, y_test, x_scaler.to(dtype), y_scaler, input_shape)

    @property
    def in_features(self) -> int:
        return self.x_train.shape[1]

    @property
    def out_features(self) -> int:
        """Network outputs the task needs: target columns, 1 logit, or one per class."""
        if self.task == "multiclass":
            return int(torch.cat([self.y_train, self.y_test]).max().item()) + 1
        return 1 if self.y_train.dim() == 1 else self.y_train.shape[1]

    @property
    def likelihood_name(self) -> str:
        """The default likelihood for the task."""
        return {"regression": "gaussian", "binary": "bernoulli", "multiclass": "categorical"}[self.task]
