from __future__ import annotations

import pytest
import torch
from bnn.datasets.continual import (
    CONTINUAL_BENCHMARKS,
    load_continual_benchmark,
    load_moving_regression,
    load_permuted_digits,
    load_split_digits,
    moving_regression_function,
)
from sklearn.datasets import load_digits


def test_split_digits_pairs_and_heads():
    multi, single = load_split_digits(), load_split_digits(multi_head=False)
    assert [task.name for task in multi.tasks] == ["0/1", "2/3", "4/5", "6/7", "8/9"]
    assert multi.multi_head and multi.out_features == 2 and not single.multi_head and single.out_features == 10
    total = 0
    for t, (a, b) in enumerate(zip(multi.tasks, single.tasks)):
        assert set(a.y_train.tolist()) == {0, 1} and set(b.y_train.tolist()) == {2 * t, 2 * t + 1}
        torch.testing.assert_close(a.x_train, b.x_train)
        total += a.y_train.numel() + a.y_test.numel()
    assert total == load_digits().target.shape[0]  # every image in exactly one task and one split
    assert float(multi.tasks[0].x_train.max()) <= 1.0 and float(multi.tasks[0].x_train.min()) >= 0.0


def test_permuted_digits_permute_the_same_images():
    benchmark = load_permuted_digits()
    first, other = benchmark.tasks[0], benchmark.tasks[3]
    torch.testing.assert_close(first.y_test, other.y_test)
    torch.testing.assert_close(first.x_train.sort(dim=1).values, other.x_train.sort(dim=1).values)
    assert not torch.equal(first.x_train, other.x_train)
    assert torch.equal(load_permuted_digits(seed=0).tasks[2].x_train, benchmark.tasks[2].x_train)
    assert not torch.equal(load_permuted_digits(seed=1).tasks[2].x_test, benchmark.tasks[2].x_test)


def test_moving_regression_moves_its_window():
    benchmark = load_moving_regression()
    lows = [float(task.x_train.min()) for task in benchmark.tasks]
    assert lows == sorted(lows) and lows[-1] - lows[0] > 4
    for task in benchmark.tasks:
        residual = task.y_train - moving_regression_function(task.x_train[:, 0])
        assert residual.std() < 0.15  # the noise sd is 0.1


def test_registry_and_bad_input():
    assert set(CONTINUAL_BENCHMARKS.names()) == {"split-digits", "split-digits-single-head", "permuted-digits",
                                                 "moving-regression"}
    assert load_continual_benchmark("split-digits-single-head").name == "split-digits-single-head"
    with pytest.raises(ValueError, match="unknown continual benchmark 'mnist'"):
        load_continual_benchmark("mnist")
    with pytest.raises(ValueError, match="test_fraction must lie strictly between 0 and 1"):
        load_split_digits(test_fraction=1.0)
    assert [task.name for task in load_split_digits().first_tasks(2).tasks] == ["0/1", "2/3"]
    with pytest.raises(ValueError, match="count must be an integer in 1..5"):
        load_split_digits().first_tasks(6)
