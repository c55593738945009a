"""UCL: each mean learns at a rate scaled by its scale after the last task, so what the earlier tasks pinned down stays."""

from __future__ import annotations

import torch
from bnn.datasets.continual import load_split_digits
from bnn.guides.flat_weights import split_flat
from bnn.inference.continual import ContinualOptions, ContinualSetup
from bnn.inference.continual.flat_gaussian import FlatGaussian, unlearnt_heads
from bnn.inference.continual.ucl import mean_rate_scale, ucl
from bnn.models import get_prior

from tests.experiments.continual.test_run import TINY, small


def _carried(setup: ContinualSetup, shared_std: float, head_std: float) -> tuple[FlatGaussian, dict]:
    """A posterior after task 0 whose shared layers have scale ``shared_std`` and whose heads ``head_std``."""
    model = setup.model()
    heads = torch.cat([torch.full((site.numel,), site.name.startswith("heads.")) for site in model.sites])
    mean = 0.1 * torch.randn(heads.shape[0], generator=torch.Generator().manual_seed(5))
    state = FlatGaussian(mean, torch.where(heads, head_std, shared_std))
    return state, {"posterior": state.config(model, "test")}


def test_the_rate_is_the_scale_over_the_first_priors_and_one_where_no_task_has_reached():
    setup = ContinualSetup(small(load_split_digits()), ContinualOptions(**{**TINY, "prior_scale": 2.0}))
    model = setup.model()
    state, _ = _carried(setup, shared_std=0.01, head_std=0.5)
    assert torch.equal(mean_rate_scale(setup, model, 0, state), torch.ones_like(state.std))
    scale = mean_rate_scale(setup, model, 1, state)
    fresh = unlearnt_heads(setup, model, 1)
    assert fresh.any() and torch.equal(scale[fresh], torch.ones(int(fresh.sum())))
    assert torch.allclose(scale[~fresh], state.std[~fresh] / 2.0)


def test_weights_the_last_task_pinned_down_barely_move_while_the_new_head_learns():
    setup = ContinualSetup(small(load_split_digits()), ContinualOptions(**{**TINY, "steps": 30}))
    model = setup.model()
    before, carry = _carried(setup, shared_std=1e-6, head_std=0.5)
    learned = ucl(setup, 1, carry)
    after = FlatGaussian.start(model, learned.carry["posterior"], 1.0, torch.Generator())
    assert get_prior(learned.carry["posterior"]).source == "ucl"
    moved = split_flat(model.sites, (after.mean - before.mean).abs())
    # 30 Adam steps at rate 0.01 x 1e-6 move a shared mean by well under 1e-6; the new head learns at the full rate
    assert all(moved[name].max() < 1e-6 for name in moved if name.startswith("layers."))
    assert moved["heads.1.weight"].max() > 0.05
    probabilities = learned.predict(setup.test_data(1)[0])
    assert torch.allclose(probabilities.sum(-1), torch.ones(probabilities.shape[0]))
