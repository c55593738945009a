"""Minibatch KL weights: the formulas, the handler that applies them, and their plumbing through SVI."""

from __future__ import annotations

import math

import pyro
import pytest
import torch
from bnn.guides import MeanFieldGuide
from bnn.guides.kl import gaussian_kl
from bnn.inference import fit
from bnn.inference.svi.kl_weights import KLWeighting, kl_scaled
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior
from pyro.infer import JitTrace_ELBO, Trace_ELBO

from bnn.cli.arguments import fit_options
from bnn.cli.main import build_parser
from bnn.options import parse_option


def epoch_weights(weighting: KLWeighting, num_batches: int, epoch: int = 0, warmup_steps: int = 1) -> list[float]:
    return [
        weighting.weight(batch=i, num_batches=num_batches, step=epoch * num_batches + i, warmup_steps=warmup_steps)
        for i in range(num_batches)
    ]


@pytest.mark.parametrize("num_batches", [1, 2, 7, 60, 2000])
def test_uniform_and_blundell_weights_of_every_epoch_sum_to_one(num_batches):
    for weighting in (KLWeighting.UNIFORM, KLWeighting.BLUNDELL):
        for epoch in range(3):
            assert math.fsum(epoch_weights(weighting, num_batches, epoch)) == pytest.approx(1.0, rel=1e-12)


def test_blundell_weights_are_the_papers_formula_and_halve_batch_by_batch():
    weights = epoch_weights(KLWeighting.BLUNDELL, 5)
    assert weights == pytest.approx([2 ** (5 - i) / (2**5 - 1) for i in range(1, 6)], rel=1e-15)
    assert all(a == pytest.approx(2 * b) for a, b in zip(weights, weights[1:]))
    assert epoch_weights(KLWeighting.BLUNDELL, 2000)[0] == pytest.approx(0.5)  # no overflow for many batches


@pytest.mark.parametrize("num_batches, warmup_steps", [(4, 10), (1, 4), (7, 7), (3, 1)])
def test_warmup_weights_ramp_linearly_then_sum_to_one_in_every_epoch_after_the_warmup(num_batches, warmup_steps):
    """beta_t = min(1, (t + 1) / W): an epoch's weights sum to the mean of beta over its steps, below 1 while the
    warm-up lasts (annealing, by design) and exactly 1 in every epoch that starts at t >= W - 1."""
    m, w = num_batches, warmup_steps
    epochs = range(w // m + 4)
    sums = [math.fsum(epoch_weights(KLWeighting.WARMUP, m, epoch, w)) for epoch in epochs]
    expected = [math.fsum(min(1.0, (e * m + i + 1) / w) for i in range(m)) / m for e in epochs]
    assert sums == pytest.approx(expected, rel=1e-12)
    for epoch, total in zip(epochs, sums):
        if epoch * m >= w - 1:
            assert total == pytest.approx(1.0, rel=1e-12)
        else:
            assert total < 1


def test_warmup_weights_of_a_worked_example():
    """M = 4 batches, W = 10: epoch sums (1+2+3+4)/40, (5+6+7+8)/40, then 1 from the epoch starting at t = 12."""
    sums = [math.fsum(epoch_weights(KLWeighting.WARMUP, 4, epoch, 10)) for epoch in range(5)]
    assert sums == pytest.approx([0.25, 0.65, 0.975, 1.0, 1.0], rel=1e-12)
    assert epoch_weights(KLWeighting.WARMUP, 1, 0, 4) == [0.25]


def test_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="unknown kl_weighting 'annealed'; choose from \\['uniform', 'blundell', 'warmup'\\]"):
        parse_option(KLWeighting, "annealed", "kl_weighting")


def network() -> BayesianMLP:
    return BayesianMLP(2, 1, hidden=(3,), prior=GaussianPrior(0.8), likelihood=GaussianLikelihood(0.4))


@pytest.mark.parametrize("elbo_class", [Trace_ELBO, JitTrace_ELBO])
def test_the_kl_scale_multiplies_the_kl_term_only_and_is_an_input_of_the_compiled_loss(elbo_class):
    """Same draws at scales c = 0, 0.5, 1: the loss is affine in c (a JIT-frozen constant would make it flat),
    and its slope is the KL term."""
    x, y = torch.randn(10, 2), torch.randn(10)
    with pyro.get_param_store().scope():
        m = network()
        guide = MeanFieldGuide(m, init_rho=-1.0, kl="closed-form")
        model_fn, guide_fn = kl_scaled(m), kl_scaled(guide)
        elbo = elbo_class(max_plate_nesting=1, **({"ignore_jit_warnings": True} if elbo_class is JitTrace_ELBO else {}))
        elbo.differentiable_loss(model_fn, guide_fn, x, y, torch.tensor(1.0))  # compiles under JIT
        losses = []
        for scale in (0.0, 0.5, 1.0):
            pyro.set_rng_seed(7)
            losses.append(elbo.differentiable_loss(model_fn, guide_fn, x, y, torch.tensor(scale)).item())
        kl = sum(gaussian_kl(loc, s, 0.8).sum() for loc, s in guide.site_loc_scale().values()).item()
    assert losses[2] - losses[0] == pytest.approx(kl, rel=1e-4)
    assert losses[1] - losses[0] == pytest.approx(0.5 * kl, rel=1e-4)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("weighting", ["blundell", "warmup"])
def test_svi_applies_the_weight_of_every_step(weighting, jit):
    """With the guide frozen (lr 1e-12) and the same seed, a weighted fit and a uniform fit see the same draws,
    so their ELBOs differ by (1 - M pi_t) KL at each step t: recover M pi_t and compare with the formula."""
    x, y = torch.randn(30, 2), torch.randn(30)
    options = dict(guide="meanfield", guide_options={"kl": "closed-form"}, steps=14, batch_size=10, lr=1e-12,
                   jit=jit, seed=5, progress=False, num_samples=2)
    weighted = fit(network(), (x, y), kl_weighting=weighting, **options)
    uniform = fit(network(), (x, y), **options)
    kl = sum(gaussian_kl(loc, s, 0.8).sum() for loc, s in weighted.extras["guide"].site_loc_scale().values()).item()
    warmup_steps = weighted.record.kl_warmup_steps or 1
    assert weighting != "warmup" or warmup_steps == math.ceil(0.25 * 14)
    for step, (a, b) in enumerate(zip(weighted.record.elbo, uniform.record.elbo)):
        expected = 3 * KLWeighting(weighting).weight(batch=step % 3, num_batches=3, step=step,
                                                          warmup_steps=warmup_steps)
        assert 1 - (a - b) / kl == pytest.approx(expected, abs=1e-3)
    assert weighted.record.kl_weighting == weighting and uniform.record.kl_weighting == "uniform"


def test_full_batch_blundell_is_plain_svi():
    x, y = torch.randn(20, 2), torch.randn(20)
    options = dict(guide="meanfield", steps=10, seed=2, progress=False, num_samples=3)
    assert fit(network(), (x, y), kl_weighting="blundell", **options).record.elbo == fit(
        network(), (x, y), **options
    ).record.elbo


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kl_weighting": "linear"}, "unknown kl_weighting 'linear'"),
        ({"kl_warmup_fraction": 0.5}, "kl_warmup_fraction applies to kl_weighting='warmup' only"),
        ({"kl_weighting": "warmup", "kl_warmup_fraction": 0.0}, "kl_warmup_fraction must lie in \\(0, 1\\]"),
    ],
)
def test_bad_weighting_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        fit(network(), (torch.randn(8, 2), torch.randn(8)), steps=2, progress=False, **options)


def test_cli_forwards_the_weighting_only_when_given():
    parser = build_parser()
    given = parser.parse_args(["fit", "--out", "x", "--kl-weighting", "warmup", "--kl-warmup-fraction", "0.3"])
    assert fit_options(given)["kl_weighting"] == "warmup" and fit_options(given)["kl_warmup_fraction"] == 0.3
    assert "kl_weighting" not in fit_options(parser.parse_args(["fit", "--out", "x"]))
