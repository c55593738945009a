r"""Whether a gradient method can afford the full batch: the rule that sends the MAP, SVI and SG-MCMC onto minibatches.

A full-batch fit of :math:`G` gradients over :math:`N` rows does :math:`W = G\,N\,F` floating-point operations, with
:math:`F` those of one example's gradient of the log-likelihood, counted by ``torch.utils.flop_counter`` on
:data:`FLOP_ROWS` rows of zeros at zero weights (targets drawn from the observation distribution there, the global
random state left as it was). The count depends on the network's shapes and the rows only, not on the data's values,
the machine or its load, so the same fit takes the same regime everywhere. Above :data:`FULL_BATCH_WORK` the fit
runs on minibatches of :data:`BATCH_SIZE` rows, a plain training's unit of work (:func:`regime_rows`).
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

FULL_BATCH_WORK = 2e11
"""The most floating-point operations a full-batch fit may take to be cheap (about half a minute on one core of the
project's machine)."""
FLOP_ROWS = 16
"""The rows the gradient's operations are counted on."""
BATCH_SIZE = 128
"""The rows of a minibatch where the full batch is not cheap: a plain training's batch."""


def example_flops(model) -> float:
    """:math:`F`, the floating-point operations of one example's gradient of the log-likelihood (module notes)."""
    dtype = torch.get_default_dtype()
    weights = {site.name: torch.zeros(site.shape, dtype=dtype, requires_grad=True) for site in model.sites}
    latents = {name: torch.ones((), dtype=dtype) for name in model.likelihood.latent_priors()}
    x = torch.zeros(FLOP_ROWS, model.in_features, dtype=dtype)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        y = model.observation_distribution(x, {**weights, **latents}).sample()
    with FlopCounterMode(display=False) as counter:
        model.observation_distribution(x, {**weights, **latents}).log_prob(y).sum().backward()
    return counter.get_total_flops() / FLOP_ROWS


def full_batch_work(model, rows: int, gradients: int) -> float:
    """:math:`W = G\\,N\\,F`: the operations of ``gradients`` full-batch gradients over ``rows`` rows."""
    return gradients * rows * example_flops(model)


def full_batch_affordable(model, rows: int, gradients: int) -> bool:
    """Whether ``gradients`` full-batch gradients over ``rows`` rows are cheap: :math:`W` at most
    :data:`FULL_BATCH_WORK`."""
    return full_batch_work(model, rows, gradients) <= FULL_BATCH_WORK


def regime_rows(model, rows: int, gradients: int) -> int:
    """The rows of each of ``gradients`` gradients of a fit of ``model`` on ``rows`` rows: all of them where that is
    cheap (or where no ``model`` is known), else :data:`BATCH_SIZE`."""
    if model is None or full_batch_affordable(model, rows, gradients):
        return rows
    return min(BATCH_SIZE, rows)
