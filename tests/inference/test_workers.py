"""The shared worker helpers of :mod:`bnn.inference.workers`."""

from __future__ import annotations

import os

import torch
from bnn.inference.workers import available_cores, one_torch_thread


def test_one_torch_thread_restores_the_thread_count():
    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_available_cores_are_those_this_process_may_run_on():
    assert available_cores() == len(os.sched_getaffinity(0))
