"""Data for the BNN collection: built-in sets (tabular, the 8x8 digits, MNIST-1D), the UCI benchmark loader, validation."""

from __future__ import annotations

from pathlib import Path

from bnn.datasets.dataset import TASKS, Dataset
from bnn.datasets.mnist1d import load_mnist1d, load_mnist1d_40k
from bnn.datasets.sklearn_sets import load_breast_cancer_binary, load_diabetes_regression, load_digits_images
from bnn.datasets.standardize import Standardizer
from bnn.datasets.toy import load_toy1d, toy_function
from bnn.datasets.uci import load_uci
from bnn.datasets.uci_location import UCI_DIR_VARIABLE, find_uci_dir
from bnn.datasets.validation import as_float_tensor, check_inputs_targets

from bnn.registry import Registry

DATASETS = Registry("dataset")
DATASETS.register("toy1d", load_toy1d)
DATASETS.register("diabetes", load_diabetes_regression)
DATASETS.register("breast_cancer", load_breast_cancer_binary)
DATASETS.register("digits", load_digits_images)
DATASETS.register("mnist1d", load_mnist1d)
DATASETS.register("mnist1d-40k", load_mnist1d_40k)


def load_dataset(name: str, *, uci_dir: str | Path | None = None, split: int = 0, seed: int = 0) -> Dataset:
    """A built-in data set by name, or with ``uci_dir`` the UCI set ``name``, split ``split``."""
    if uci_dir is not None:
        return load_uci(uci_dir, name, split)
    if name not in DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; choose from {DATASETS.names()} or pass uci_dir (--uci-dir) "
            "for a UCI data set such as 'yacht'"
        )
    return DATASETS.get(name)(seed=seed)


__all__ = [
    "DATASETS", "TASKS", "UCI_DIR_VARIABLE", "Dataset", "Standardizer", "as_float_tensor", "check_inputs_targets",
    "find_uci_dir", "load_breast_cancer_binary", "load_dataset", "load_diabetes_regression", "load_digits_images",
    "load_mnist1d", "load_mnist1d_40k", "load_toy1d", "load_uci",
    "toy_function",
]
