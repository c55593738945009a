"""What an SVGD fit costs: its steps, each the gradient of the log joint at every particle on all the training rows
(vectorised over the particles) and the kernel's :math:`n^2 D` work, timed as whole steps of Pyro's SVGD."""

from __future__ import annotations

import pyro
import torch
from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.full_batch_work import FULL_BATCH_WORK, full_batch_work
from bnn.inference.svgd.fit import stein_steps
from bnn.inference.svgd.flat_model import FlatLatents
from bnn.inference.svgd.options import SVGDOptions

from bnn.runtime.seeding import seeded
from bnn.runtime.timing import median_seconds


def count(options: SVGDOptions, rows: int, model) -> GradientCount:
    """The steps of ``options``'s run on ``rows`` rows; the count says when their gradients are not cheap on the full
    batch (:func:`~bnn.inference.core.full_batch_work.full_batch_work` above
    :data:`~bnn.inference.core.full_batch_work.FULL_BATCH_WORK`), which SVGD cannot cut into minibatches."""
    gradients = options.steps * options.num_samples
    how = f"{options.steps} steps of {options.num_samples} particles, each on all {rows} rows"
    if model is not None and full_batch_work(model, rows, gradients) > FULL_BATCH_WORK:
        how += (f"; {full_batch_work(model, rows, gradients):.2g} floating-point operations, past the "
                f"{FULL_BATCH_WORK:.0e} of a cheap full-batch fit, and SVGD takes no minibatches: lower steps or "
                "num_samples, or fit these data with a minibatch method (svi, ivon)")
    return GradientCount(options.steps, 1, "expected", how)


def step_seconds(model, x: torch.Tensor, y: torch.Tensor, options: SVGDOptions) -> float:
    """The median time of one step of Pyro's SVGD with ``options``' particles and kernel on ``(x, y)``, from the
    prior, in a param store of its own."""
    latents = FlatLatents.of(model, x, y)
    with seeded(options.seed), pyro.get_param_store().scope():
        svgd, _ = stein_steps(latents, x, y, options)
        return median_seconds(lambda: svgd.step(x, y))


COST = CostModel(count, step_seconds, "svgd step", unit="steps")
