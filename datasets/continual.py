r"""Task sequences for continual learning, all offline: split digits, permuted digits, a moving 1-D regression.

The digits are scikit-learn's bundled 8x8 handwritten digits (1,797 images, 64 pixels in 0..16, scaled to
[0, 1] by a fixed division so every task sees the same scale), split once into train and test (stratified,
``test_fraction``, ``seed``).

``split-digits``
    Five tasks, the digit pairs 0/1, 2/3, 4/5, 6/7, 8/9 (Zenke et al. 2017's split MNIST). Multi-head: each task
    its own two-way head, labels 0/1 within the task (``multi_head=True``); single-head: one ten-way output,
    the digits' own labels.
``permuted-digits``
    Five tasks, every image with the pixels of task :math:`t` shuffled by a fixed permutation
    :math:`\pi_t` (:math:`\pi_0` the identity; Goodfellow et al. 2013's permuted MNIST), one ten-way output.
``moving-regression``
    Five tasks of :math:`y = \sin(2x) + 0.3x + \varepsilon`, :math:`\varepsilon \sim \mathcal{N}(0, 0.1^2)`,
    with task :math:`t`'s inputs uniform on :math:`[-3 + 1.2t, -1.8 + 1.2t]`: the input range moves task by task,
    so a net that forgets fits only the last window. Single head, Gaussian likelihood.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from bnn.registry import Registry

DIGIT_PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7), (8, 9))
NUM_TASKS = 5
PIXEL_MAX = 16.0
REGRESSION_NOISE = 0.1
REGRESSION_TRAIN, REGRESSION_TEST = 60, 100
WINDOW_START, WINDOW_WIDTH = -3.0, 1.2


@dataclass(frozen=True)
class ContinualTask:
    """One task: its name, training and test inputs (features only) and targets as its output head reads them."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


@dataclass(frozen=True)
class ContinualBenchmark:
    """A sequence of tasks and the network output they need.

    Attributes
    ----------
    name : str
        The benchmark's name (``split-digits``, ...).
    tasks : tuple of ContinualTask
        In the order they are learnt.
    likelihood : str
        ``"categorical"`` or ``"gaussian"``.
    out_features : int
        Outputs of one head (multi-head) or of the network (single head).
    multi_head : bool
        Whether each task has its own output head (the model reads the task index).
    """

    name: str
    tasks: tuple[ContinualTask, ...]
    likelihood: str
    out_features: int
    multi_head: bool

    @property
    def in_features(self) -> int:
        return self.tasks[0].x_train.shape[1]

    @property
    def is_classification(self) -> bool:
        return self.likelihood == "categorical"

    def first_tasks(self, count: int) -> ContinualBenchmark:
        """The same benchmark cut to its first ``count`` tasks (a short run)."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(self.tasks):
            raise ValueError(f"count must be an integer in 1..{len(self.tasks)}, got {count!r}")
        return ContinualBenchmark(self.name, self.tasks[:count], self.likelihood, self.out_features, self.multi_head)


def _digits_split(seed: int, test_fraction: float):
    from sklearn.datasets import load_digits  # scikit-learn at the first load: seconds to import
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / PIXEL_MAX, y, test_size=test_fraction, random_state=seed,
                                                        stratify=y)
    as_x = lambda a: torch.as_tensor(a, dtype=torch.get_default_dtype())  # noqa: E731
    return as_x(x_train), torch.as_tensor(y_train), as_x(x_test), torch.as_tensor(y_test)


def _check_fraction(test_fraction: float) -> None:
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction!r}")


def load_split_digits(*, multi_head: bool = True, seed: int = 0, test_fraction: float = 0.2) -> ContinualBenchmark:
    """Split digits: five two-digit tasks (see the module notes); ``multi_head`` picks the output setting."""
    _check_fraction(test_fraction)
    x_train, y_train, x_test, y_test = _digits_split(seed, test_fraction)
    tasks = []
    for first, second in DIGIT_PAIRS:
        train = (y_train == first) | (y_train == second)
        test = (y_test == first) | (y_test == second)
        shift = first if multi_head else 0
        tasks.append(ContinualTask(f"{first}/{second}", x_train[train], y_train[train] - shift,
                                   x_test[test], y_test[test] - shift))
    name = "split-digits" if multi_head else "split-digits-single-head"
    return ContinualBenchmark(name, tuple(tasks), "categorical", 2 if multi_head else 10, multi_head)


def load_split_digits_single_head(*, seed: int = 0, test_fraction: float = 0.2) -> ContinualBenchmark:
    """Split digits with one ten-way output for all tasks (the task of a test input is not given)."""
    return load_split_digits(multi_head=False, seed=seed, test_fraction=test_fraction)


def load_permuted_digits(*, seed: int = 0, test_fraction: float = 0.2) -> ContinualBenchmark:
    """Permuted digits: five ten-way tasks, task ``t`` with a fixed pixel permutation (``seed`` fixes them)."""
    _check_fraction(test_fraction)
    x_train, y_train, x_test, y_test = _digits_split(seed, test_fraction)
    generator = torch.Generator().manual_seed(seed)
    permutations = [torch.arange(x_train.shape[1])] + [torch.randperm(x_train.shape[1], generator=generator)
                                                       for _ in range(NUM_TASKS - 1)]
    tasks = tuple(ContinualTask(f"permutation {t}", x_train[:, p], y_train, x_test[:, p], y_test)
                  for t, p in enumerate(permutations))
    return ContinualBenchmark("permuted-digits", tasks, "categorical", 10, False)


def moving_regression_function(x: torch.Tensor) -> torch.Tensor:
    r""":math:`f(x) = \sin(2x) + 0.3x`, the noise-free target of ``moving-regression``."""
    return torch.sin(2 * x) + 0.3 * x


def load_moving_regression(*, seed: int = 0) -> ContinualBenchmark:
    """The moving 1-D regression: five windows of inputs, one after the other (see the module notes)."""
    generator = torch.Generator().manual_seed(seed)

    def draw(low: float, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = low + WINDOW_WIDTH * torch.rand(n, 1, generator=generator)
        return x, moving_regression_function(x[:, 0]) + REGRESSION_NOISE * torch.randn(n, generator=generator)

    tasks = []
    for t in range(NUM_TASKS):
        low = WINDOW_START + WINDOW_WIDTH * t
        (x_train, y_train), (x_test, y_test) = draw(low, REGRESSION_TRAIN), draw(low, REGRESSION_TEST)
        tasks.append(ContinualTask(f"x in [{low:g}, {low + WINDOW_WIDTH:g}]", x_train, y_train, x_test, y_test))
    return ContinualBenchmark("moving-regression", tuple(tasks), "gaussian", 1, False)


CONTINUAL_BENCHMARKS: Registry[Callable[..., ContinualBenchmark]] = Registry("continual benchmark")
CONTINUAL_BENCHMARKS.register("split-digits", load_split_digits)
CONTINUAL_BENCHMARKS.register("split-digits-single-head", load_split_digits_single_head)
CONTINUAL_BENCHMARKS.register("permuted-digits", load_permuted_digits)
CONTINUAL_BENCHMARKS.register("moving-regression", load_moving_regression)


def load_continual_benchmark(name: str, *, seed: int = 0) -> ContinualBenchmark:
    """The registered benchmark ``name`` (:data:`CONTINUAL_BENCHMARKS`) with data seed ``seed``."""
    return CONTINUAL_BENCHMARKS.get(name)(seed=seed)


__all__ = ["CONTINUAL_BENCHMARKS", "ContinualBenchmark", "ContinualTask", "load_continual_benchmark",
           "load_moving_regression", "load_permuted_digits", "load_split_digits", "moving_regression_function"]
