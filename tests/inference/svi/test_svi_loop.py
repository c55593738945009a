"""The SVI loop's fast path: a constant rate runs plain Adam, with the same steps as the scheduled optimiser."""

from __future__ import annotations

import torch
from bnn.inference import fit
from bnn.models import BayesianMLP


def test_constant_rate_without_a_scheduler_takes_the_scheduled_optimisers_steps():
    """An exponential schedule with final fraction 1 has factor 1 at every step: it runs through
    PyroLRScheduler, the constant schedule through plain Adam, and both give the same numbers."""
    x, y = torch.randn(24, 2), torch.randn(24)
    options = dict(steps=12, batch_size=8, lr=0.05, seed=4, progress=False, num_samples=3)
    plain = fit(BayesianMLP(2, 1, hidden=(3,)), (x, y), lr_schedule="constant", **options)
    scheduled = fit(BayesianMLP(2, 1, hidden=(3,)), (x, y), lr_schedule="exponential", final_lr_fraction=1.0, **options)
    assert plain.record.elbo == scheduled.record.elbo
    assert all(torch.equal(plain.samples[k], scheduled.samples[k]) for k in plain.samples)
    assert 0 < plain.record.first_step_seconds <= plain.record.train_seconds
