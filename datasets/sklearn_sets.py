"""Data sets that ship inside scikit-learn (no download): diabetes, breast cancer and the 8x8 digits."""

from __future__ import annotations

from bnn.datasets.dataset import Dataset


def _split(name: str, task: str, x, y, seed: int, test_fraction: float,
           input_shape: tuple[int, ...] | None = None) -> Dataset:
    stratify = y if task != "regression" else None
    from sklearn.model_selection import train_test_split  # scikit-learn at the first load: seconds to import

    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=stratify
    )
    return Dataset.from_arrays(name, task, x_train, y_train, x_test, y_test, input_shape=input_shape)


def load_diabetes_regression(seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """Diabetes progression (442 x 10), regression; a random split fixed by ``seed``."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    return _split("diabetes", "regression", x, y, seed, test_fraction)


def load_breast_cancer_binary(seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """Wisconsin breast cancer (569 x 30), binary; a stratified split fixed by ``seed``."""
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    return _split("breast_cancer", "binary", x, y, seed, test_fraction)


def load_digits_images(seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """Handwritten digits (1,797 images of 8 x 8 grey levels 0-16, flattened row by row to 64 columns), 10 classes,
    multiclass; a stratified split fixed by ``seed``; ``input_shape`` ``(8, 8)``."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return _split("digits", "multiclass", x, y, seed, test_fraction, input_shape=(8, 8))
