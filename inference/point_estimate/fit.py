r"""The MAP point estimate: the single most probable weights, the "plain network" a Bayesian one is compared with.

.. math::

    \theta_{MAP} = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta)

by :func:`~bnn.inference.map_search.map_estimate.find_map` (Adam from a draw of the prior, then a
Levenberg-Marquardt or L-BFGS
polish, in float64 as Laplace does); under a Gaussian prior this is weight decay, under a Laplace prior an L1 penalty.
With ``objective="mle"`` the prior term is dropped (its weight is 0 in ``find_map``), leaving maximum likelihood,

.. math::

    \theta_{MLE} = \arg\max_\theta \; \log p(y \mid x, \theta),

the classical network without regularisation; the prior then only draws the start. A learned
Gaussian noise is chosen by the Laplace evidence under a Gaussian prior (:mod:`bnn.inference.map_search.map_estimate`), and
set to its maximum-likelihood value under ``objective="mle"``. The
:class:`~bnn.inference.core.posterior.Posterior` holds one draw, ``(1, 1, *site_shape)``: a point mass, so its
predictive is the plug-in :math:`p(y \mid x, \hat\theta)`, whose only spread is the likelihood's noise. It is
as confident between and beyond the training inputs as on them; the Bayesian methods are not.
"""

from __future__ import annotations

import time

import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.core.posterior import Posterior
from bnn.inference.map_search.map_estimate import find_map, working_data
from bnn.inference.point_estimate.options import MapOptions, Objective
from bnn.inference.point_estimate.record import MapRecord

from bnn.runtime.seeding import seeded


def run_map(model, x: torch.Tensor, y: torch.Tensor, options: MapOptions) -> Posterior:
    """Find the MAP (or, with ``options.objective`` ``"mle"``, the maximum-likelihood) weights of ``model`` on
    ``(x, y)`` and return them as a one-draw posterior.

    Warns
    -----
    RuntimeWarning
        When the polish stopped with a Newton decrement above ``map_tolerance`` (the record says so too).
    """
    x_work, y_work = working_data(x, y)
    began = time.perf_counter()
    with seeded(options.seed):  # find_map warns, at the user's line, when the polish stops short
        estimate = find_map(model, x_work, y_work, **options.map_fit_arguments(), progress=options.progress,
                            multiplier=0.0 if options.objective is Objective.MLE else 1.0)
    train_seconds = time.perf_counter() - began
    draws = {**split_flat(model.sites, estimate.theta), **estimate.latents}
    record = MapRecord(
        seed=options.seed, train_seconds=train_seconds, options=options, map_lbfgs_iterations=estimate.lbfgs_iterations,
        map_grad_norm=estimate.grad_norm, map_converged=estimate.converged, map_at_kink=estimate.at_kink,
        map_stalled=estimate.stalled, map_newton_decrement=estimate.newton_decrement, map_polish=estimate.polish,
        map_last_rise=estimate.last_rise,
        map_noise_ratio=estimate.noise_ratio,
        log_likelihood=estimate.log_likelihood, log_joint=estimate.log_likelihood + estimate.log_prior,
        noise=estimate.latents["sigma"].item() if "sigma" in estimate.latents else None,
    )
    return Posterior(model, {name: value.to(x.dtype).reshape(1, 1, *value.shape) for name, value in draws.items()},
                     x, y, record)
