"""What an SVGD fit costs: its steps, each the gradient of the log joint at every particle on all the training rows
(Pyro evaluates the particles vectorised; the kernel's :math:`n^2 D` work comes on top)."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.full_batch_work import FULL_BATCH_WORK, full_batch_work
from bnn.inference.map_search.log_joint import log_joint_gradient_seconds
from bnn.inference.svgd.options import SVGDOptions


def count(options: SVGDOptions, rows: int, model) -> GradientCount:
    """The gradients of ``options``'s run on ``rows`` rows; the count says when they are not cheap on the full batch
    (:func:`~bnn.inference.core.full_batch_work.full_batch_work` above
    :data:`~bnn.inference.core.full_batch_work.FULL_BATCH_WORK`), which SVGD cannot cut into minibatches."""
    gradients = options.steps * options.num_samples
    how = f"{options.steps} steps x {options.num_samples} particles, each on all {rows} rows"
    if model is not None and full_batch_work(model, rows, gradients) > FULL_BATCH_WORK:
        how += (f"; {full_batch_work(model, rows, gradients):.2g} floating-point operations, past the "
                f"{FULL_BATCH_WORK:.0e} of a cheap full-batch fit, and SVGD takes no minibatches: lower steps or "
                "num_samples, or fit these data with a minibatch method (svi, ivon)")
    return GradientCount(gradients, 1, "expected", how)


COST = CostModel(count, log_joint_gradient_seconds, "log joint")
