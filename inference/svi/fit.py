r"""Stochastic variational inference: maximise the ELBO over the guide's parameters.

.. math::

    \mathcal{L}(\phi) = \mathbb{E}_{q_\phi(W)}\Big[\frac{N}{|B|}\sum_{i \in B} \log p(y_i \mid x_i, W)\Big]
    - \mathrm{KL}\big(q_\phi(W) \,\|\, p(W)\big)

estimated with reparameterised draws (``num_particles`` of them, vectorised) on
minibatches :math:`B` (the model's ``data`` plate rescales the likelihood by
:math:`N/|B|`). Each epoch shuffles the data and cuts it into :math:`\lfloor N/|B| \rfloor`
equal batches (:mod:`bnn.inference.svi.minibatches`); the KL's share of each batch is a
:class:`~bnn.inference.svi.kl_weights.KLWeighting`.

The parts: the guide and where it starts, the MAP weights with ``init_loc="map"``
(:mod:`bnn.inference.svi.guide`); the loss and the (model, guide) pair it scores
(:mod:`bnn.inference.svi.objective`); Adam and its schedule (:mod:`bnn.inference.svi.optimiser`);
the steps (:mod:`bnn.inference.svi.loop`).

A guide may take part in two optional ways: a method ``elbo_pair()`` returns the model and
guide SVI optimises in place of (model, guide) (the mean-field guides skip prior terms
they cancel analytically, local reparameterisation rewrites the likelihood), and a method
``fitted_constants()`` returns per-site arrays for the posterior's ``constant_data``
(the empirical-Bayes prior variances).

Faults lose nothing. With ``checkpoint_dir`` the loop writes a checkpoint
(:mod:`bnn.inference.svi.checkpoint`) every ``checkpoint_every`` steps, at the end, and when Ctrl-C
or SIGTERM arrives (deferred to the end of the current step, :mod:`bnn.runtime.stop_signals`);
``resume`` continues from it to the same numbers as a run never stopped. A step whose loss or
gradient is not finite is not applied: the fit stops with a
:class:`~bnn.inference.svi.nonfinite.NonFiniteELBOError` that names the step and the culprits, holds
the posterior of the last finite parameters and, with ``checkpoint_dir``, saves their state.
"""

from __future__ import annotations

import warnings

import pyro
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.svi.checkpoint import checkpoint_target
from bnn.inference.svi.draw_checks import check_draws
from bnn.inference.svi.guide import build_svi_guide, check_hierarchical_guide
from bnn.inference.svi.loop import SVILoop
from bnn.inference.svi.minibatches import StepPlan
from bnn.inference.svi.options import SVIOptions
from bnn.inference.svi.record import ELBO_RISING

from bnn.runtime.seeding import seeded
from bnn.runtime.stacklevel import user_stacklevel
from bnn.runtime.stop_signals import deferred_stop_signals


def run_svi(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> Posterior:
    r"""Fit ``options.guide`` to ``model`` by SVI with Adam and return draws from the fitted guide.

    Parameters
    ----------
    model : BayesianNetwork
        The model.
    x, y : torch.Tensor
        The training data, :math:`N` examples.
    options : SVIOptions
        The validated options.

    Returns
    -------
    Posterior
        ``options.num_samples`` draws from the guide after :math:`T` steps, with an
        :class:`~bnn.inference.svi.record.SVIRecord`; ``extras["guide"]`` is the fitted guide bound to its own
        parameters (:class:`~bnn.inference.svi.fitted_guide.FittedGuide`), ``extras["param_state"]`` their store state.

    Warns
    -----
    ConvergenceWarning
        When the ELBO was still rising at the end (:mod:`~bnn.inference.core.objective_trend`); the record's
        ``problems()`` says so too.

    Raises
    ------
    NonFiniteELBOError
        When a step's loss or gradient is not finite; names the step and the parameters or sites
        that are not finite, and holds the posterior of the parameters before that step.
    ValueError
        For a guide that cannot cover the scales of hierarchical priors
        (:func:`~bnn.inference.svi.guide.check_hierarchical_guide`),
        a ``batch_size`` above the data's size, a ``resume`` folder that is missing, damaged or another
        fit's, or final draws that are not finite.
    """
    check_hierarchical_guide(model, options)
    plan = StepPlan.of(model, x.shape[0], options)
    checkpoint_dir = checkpoint_target(options.checkpoint_dir, options.resume)
    with seeded(options.seed), pyro.get_param_store().scope(), deferred_stop_signals(checkpoint_dir is not None) as stop:
        guide, guide_name = build_svi_guide(model, x, y, options)
        loop = SVILoop(model, x, y, guide, guide_name, options, plan, checkpoint_dir)
        if options.resume is not None:
            loop.resume(options.resume)
        loop.run(stop)
        with pyro.validation_enabled(False):  # check_draws names what a Pyro validation error would dump
            fitted = loop.posterior(loop.record(plan.total_steps))
        check_draws(model, x, fitted.samples, plan.total_steps, options.lr)
    trend = fitted.record.trend
    if trend is not None and trend.rising:
        warnings.warn(trend.sentence(*ELBO_RISING), ConvergenceWarning, stacklevel=user_stacklevel())
    return fitted
