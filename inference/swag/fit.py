r"""SWAG (Maddox et al. 2019) and MultiSWAG (Wilson and Izmailov 2020): a Gaussian fitted to the iterates of SGD at a
constant rate around a MAP.

Each member starts at its own MAP (:func:`~bnn.inference.map_search.map_estimate.find_map` from its own prior
draw, a learned noise chosen as there: the deep ensemble's member fits, with its seeds, in its worker processes when
``member_method`` runs them there), then runs ``swag_epochs`` epochs of
SGD on the minibatch log joint in the unconstrained space (:mod:`bnn.inference.sgmcmc.potential`: a learned noise
moves as :math:`\log\sigma`),

.. math::

    z \leftarrow z + \frac{\eta}{N}\,\widehat{\nabla}\log p(z \mid \mathcal{D}),

with the batches of a random permutation each epoch, at each member's own rate :math:`\eta = N s / \lambda_{max}`
(:math:`\lambda_{max}` the stiffest curvature of the negative log joint at its MAP,
:mod:`bnn.inference.sgmcmc.curvature`; :math:`s` = ``step_share``) unless ``swag_lr`` fixes one for all: a fixed rate
chosen on one data set overflows on a larger or less noisy one, whose curvature is larger. It collects its iterate at
the end of every epoch into the running moments of :mod:`bnn.inference.swag.moments`. The draws, ``num_samples`` from
each member's Gaussian, are ``(num_members, num_samples, *site_shape)``: MultiSWAG's predictive is the equal mixture
of its members'. The members run side by side as a leading dimension of one state (one autograd pass serves them all),
in the MAP's precision: float64 where the MAP was polished on the full batch, float32 where it ran on minibatches (as a
plain training does), the moments kept in float64 either way.

SWAG's Gaussian is not the posterior: the spread of SGD's iterates is set by the rate, the batch size and the
gradient noise (Mandt et al. 2017), and with full batches SGD does not move from the MAP, so ``batch_size`` must be
below the data size; by default it grows with the data
(:meth:`~bnn.inference.swag.options.SWAGOptions.batch_rows`: at a fixed batch the iterates' spread, over the
posterior's, grows as :math:`N / B`). The method's own check: its members' MAP convergence, and each member's
Gaussian no wider than a posterior Gaussian of the model can be (:mod:`bnn.inference.swag.effective_parameters`).
"""

from __future__ import annotations

import math
import time
import warnings

import pyro
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.map_search.map_estimate import working_data
from bnn.inference.map_search.map_starts import map_starts, stacked_sites
from bnn.inference.sgmcmc.curvature import stiffest_curvature
from bnn.inference.sgmcmc.potential import MinibatchLogJoint
from bnn.inference.swag.effective_parameters import effective_parameters
from bnn.inference.swag.moments import SWAGMoments
from bnn.inference.swag.options import MultiSWAGOptions, SWAGOptions
from bnn.inference.swag.record import MultiSWAGRecord, SWAGRecord

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded


def run_swag(model, x: torch.Tensor, y: torch.Tensor, options: SWAGOptions) -> Posterior:
    """Fit SWAG (``num_members`` = 1) or MultiSWAG to ``(x, y)`` (module notes).

    Raises
    ------
    ValueError
        For a batch (``batch_size``, or its default) not below the data size (before any work), or when SGD overflows:
        its iterates, their moments or the draws leave the finite numbers (lower ``swag_lr``, or ``step_share``).
    """
    rows = x.shape[0]
    batch = options.batch_rows(rows)
    if batch >= rows:
        raise ValueError(f"batch_size={batch} covers all {rows} training rows: full-batch gradient steps do not move "
                         "from the MAP, so SWAG would have no spread; give a batch_size below the data size")
    began = time.perf_counter()
    x_work, y_work = working_data(x, y)
    estimates = map_starts(model, x_work, y_work, options, options.seed, options.num_members, options.workers(),
                           options.progress)
    if estimates[0].minibatch:
        x_work, y_work = x_work.float(), (y_work.float() if y_work.is_floating_point() else y_work)
    with seeded(options.seed), pyro.validation_enabled(False):
        log_joint = MinibatchLogJoint(model, x_work, y_work, batch)
        z = log_joint.unconstrained(stacked_sites(model, estimates))
        curvature = stiffest_curvature(log_joint, z)
        rates = _rates(options, log_joint.num_data, curvature)
        moments, steps = _sgd(log_joint, z, rates, curvature, options)
        flat = moments.sample(options.num_samples).reshape(options.num_members * options.num_samples, log_joint.dim)
    samples = {name: value.reshape(options.num_members, options.num_samples, *value.shape[1:]).to(x.dtype)
               for name, value in log_joint.constrained(flat).items()}
    if not all(torch.isfinite(value).all() for value in samples.values()):
        raise _overflowed("in the draws from its Gaussian", rates, 2 * rows / curvature, options)
    means = {name: value.unsqueeze(1).to(x.dtype) for name, value in log_joint.constrained(moments.mean).items()}
    p_d, p_d_errors = effective_parameters(model, x, y, samples, means)
    kind = MultiSWAGRecord if isinstance(options, MultiSWAGOptions) else SWAGRecord
    noise = [estimate.latents["sigma"].item() for estimate in estimates] if "sigma" in estimates[0].latents else None
    record = kind(seed=options.seed, train_seconds=time.perf_counter() - began, options=options,
                  map_converged=[estimate.converged for estimate in estimates],
                  map_grad_norms=[estimate.grad_norm for estimate in estimates],
                  map_minibatch=estimates[0].minibatch, noise=noise,
                  member_method="parallel" if options.workers() > 1 else "sequential",
                  batch_size=batch, sgd_steps=steps, collected=moments.count,
                  curvature=curvature.tolist(), sgd_rates=rates.tolist(), effective_parameters=p_d,
                  effective_parameters_se=p_d_errors, latent_values=log_joint.dim)
    for problem in record.problems():
        warnings.warn(problem, RuntimeWarning, stacklevel=4)
    return Posterior(model, samples, x, y, record)


def _rates(options: SWAGOptions, num_data: int, curvature: torch.Tensor) -> torch.Tensor:
    r"""Each member's :math:`\eta`, ``(C,)``: ``swag_lr``, or :math:`N s / \lambda_{max}` at its MAP."""
    if options.swag_lr is not None:
        return torch.full_like(curvature, options.swag_lr)
    return num_data * options.step_share / curvature


def _sgd(log_joint: MinibatchLogJoint, z: torch.Tensor, rates: torch.Tensor, curvature: torch.Tensor,
         options: SWAGOptions) -> tuple[SWAGMoments, int]:
    r"""SGD from ``z`` ``(C, D)`` at each member's rate, an iterate collected each epoch; the moments and the steps
    taken per member. ``ValueError`` when an iterate or the moments leave the finite numbers (``curvature``, each
    member's :math:`\lambda_{max}`, gives the largest stable rate to say)."""
    moments = SWAGMoments(options.rank)
    per_epoch = math.ceil(log_joint.num_data / log_joint.batch_size)
    stable = 2 * log_joint.num_data / curvature
    members = z.shape[0]
    rate = (rates / log_joint.num_data)[:, None]
    with progress_bar(total=options.swag_epochs, desc=f"SWAG ({members} members)", enabled=options.progress,
                      leave=False) as bar:
        for epoch in range(options.swag_epochs):
            for step in range(per_epoch):
                _, gradient = log_joint.gradient(z, log_joint.next_batches(members))
                z = z + rate * gradient
                if not torch.isfinite(z).all():
                    raise _overflowed(f"at epoch {epoch}, step {step}", rates, stable, options)
            moments.collect(z.double())
            if not moments.finite():
                raise _overflowed(f"in the moments of the iterates collected by epoch {epoch}", rates, stable, options)
            bar.update(1)
    return moments, options.swag_epochs * per_epoch


def _overflowed(where: str, rates: torch.Tensor, stable: torch.Tensor, options: SWAGOptions) -> ValueError:
    r"""The error of a SGD run that left the finite numbers ``where``, naming the option that set ``rates`` and, for a
    given ``swag_lr``, the members' largest stable rate ``stable``, :math:`2N / \lambda_{max}` at their MAPs (module
    notes: the step along the stiffest direction multiplies the deviation by :math:`1 - \eta\lambda_{max}/N`)."""
    chosen, fix = (("given", f"lower swag_lr below {stable.min().item():.3g}, 2N / lambda_max at the MAP (or leave it "
                             "unset for the curvature's own rate)") if options.swag_lr is not None else
                   (f"step_share {options.step_share:g}", "lower step_share"))
    return ValueError(f"SWAG's SGD overflowed {where} (swag_lr {', '.join(f'{r:.3g}' for r in rates.tolist())}, "
                      f"{chosen}): the rate is too large for the posterior's curvature; {fix}")
