r"""What a NUTS run costs: :math:`C (W + S)(2^d - 1)` gradients of the sampler's potential on the full data, the
worst case where every draw's tree reaches the maximum depth :math:`d` (a BNN's posterior often gets there:
toy1d's does), for ``C`` chains of ``W`` warm-up and ``S`` kept draws; chains in parallel processes divide the wall
time by :math:`\min(C, \text{free cores})`. The sampler's own work between gradients is not counted (on a network as
small as toy1d's it is of the order of the gradients' own time)."""

from __future__ import annotations

import numpy as np
import torch
from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.nuts.chain import Engine, full_depth_gradients
from bnn.inference.nuts.numba_potential import kernel_gap
from bnn.inference.nuts.options import NUTSOptions
from bnn.inference.nuts.potential import FlatPotential

from bnn.runtime import workers
from bnn.runtime.timing import median_seconds


def count(options: NUTSOptions, rows: int, model) -> GradientCount:
    """The gradients of a run of ``options`` at full tree depth; the count says when the potential is a torch one
    because the compiled kernel does not apply (:func:`~bnn.inference.nuts.numba_potential.kernel_gap`)."""
    chains = options.chains()
    leapfrogs = full_depth_gradients(1, options.max_tree_depth)
    iterations = options.num_warmup + options.num_samples
    compiled = model is not None and options.engine is Engine.NUTPIE and options.jit_compile
    gap = kernel_gap(model, options.temperature) if compiled else None
    torch_potential = "" if gap is None else f"; on the torch potential, since the compiled kernel does not apply: {gap}"
    return GradientCount(chains * iterations * leapfrogs, min(chains, workers.free_cores()), "every tree at full depth",
                         f"{chains} chains x ({options.num_warmup} + {options.num_samples}) draws x {leapfrogs} leapfrog "
                         f"steps (tree depth {options.max_tree_depth}{torch_potential})")


def potential_gradient_seconds(model, x: torch.Tensor, y: torch.Tensor, options=None) -> float:
    """The median time of one value-and-gradient of the potential the NUTS engine evaluates
    (:class:`~bnn.inference.nuts.potential.FlatPotential`, at the options' temperature: a tempered one runs on a torch
    backend; built for a chain of the options' draws at full tree depth, so ``torch.compile``'d where that run pays for
    its build), at a point of small weights."""
    gradients = None if options is None else full_depth_gradients(options.num_warmup + options.num_samples,
                                                                  options.max_tree_depth)
    potential = FlatPotential(model, x, y, temperature=getattr(options, "temperature", UNTEMPERED), gradients=gradients)
    z = np.linspace(-0.5, 0.5, potential.dim)
    return median_seconds(lambda: potential.value_and_grad(z))


COST = CostModel(count, potential_gradient_seconds, "nuts potential",
                 draws=lambda options: options.chains() * options.num_samples)

DAY = 86_400.0
"""A day in seconds: the most a NUTS run's cost estimate may say (:func:`check_affordable`)."""


def check_affordable(model, x: torch.Tensor, y: torch.Tensor, options: NUTSOptions) -> None:
    """Refuse, before any work, a run whose estimate passes :data:`DAY`: :func:`count`'s gradients (every tree at full
    depth, which a BNN's posterior often reaches) times :func:`potential_gradient_seconds`, shared by the chains side
    by side. It is refused rather than warned about: the chains' MAP starts would begin at once and nothing would come
    back for a day; the message names the options that bring it under."""
    work = count(options, x.shape[0], model)
    each = potential_gradient_seconds(model, x, y, options)
    seconds = work.gradients * each / work.parallel
    if seconds > DAY:
        shared = f" / {work.parallel} processes" if work.parallel > 1 else ""
        raise ValueError(f"NUTS would take up to {seconds / 3600:,.0f} h at full tree depth, past a day: {work.how} = "
                         f"{work.gradients:,} gradients x {each:.3g} s measured per gradient of the potential{shared}; "
                         f"refused before the chains' MAP starts: lower max_tree_depth (now {options.max_tree_depth}), "
                         "num_samples or num_warmup, or fit this network with a method that scales to it (laplace, svi)")
