r"""MC dropout (Gal & Ghahramani 2016): a network trained with dropout is a variational posterior over its weights.

**Where the dropout goes.** The network says it (:meth:`~bnn.models.network.BayesianNetwork.dropped_inputs`,
:mod:`bnn.models.dropout`): the layers whose inputs are dropped and by which units. A chain of dense layers drops
every input of every layer (the paper's MLP); the CNN drops whole channels after every convolution block (spatial
dropout, one mask per channel and example) and the units of its dense head. A network that does not say is refused
before any work.

**The draws.** Dropout on the inputs of layer :math:`l` multiplies the slice :math:`W_{l,:,j}` of its weight that reads
unit :math:`j` (a column of a dense weight, an input channel of a kernel, the columns of a flattened channel) by a
mask :math:`z_{lj} \sim \text{Bernoulli}(1 - p)`. Training uses *inverted* dropout (a kept input is scaled by
:math:`1/(1-p)`), so a draw of the weights is

.. math::

    W_{l,:,j}^{(s)} = M_{l,:,j}\, z_{lj}^{(s)} / (1 - p), \qquad b_l^{(s)} = b_l,

slices zeroed at rate :math:`p`, the others scaled by :math:`1/(1-p)`, so that :math:`\mathbb{E}[W_l] = M_l`:
the fitted parameters are the posterior mean, on the scale of the prior and of every other method's draws. A
draw is one set of masks shared by every input, and ``model.forward`` at the draw is the dropout network
(:func:`dropout_forward`) at those masks. Biases are not dropped: they are point estimates, as in the paper, and so
is the weight of a layer whose inputs are kept (the CNN's first kernels, which read the one-channel image).

**The objective.** Gal & Ghahramani's KL term for this :math:`q` is, up to a constant, the prior's expected
negative log density under the masks; for the model's elementwise prior it has the closed form
:math:`\mathbb{E}_q[\log p(W_l)] = \sum_k (1 - p) \log p(M_{l,k} / (1 - p)) + p \log p(0)` over the entries :math:`k`
of a dropped weight (each is kept with its unit), the second term a constant; a weight whose inputs are kept enters
as :math:`\log p(M_l)`, like a bias. Per example the fit minimises

.. math::

    -\frac{1}{N}\Big[\frac{N}{B}\sum_{i \in \text{batch}} \log p\big(y_i \mid f(x_i; M, z_i), \sigma\big)
    + \sum_{l \in \text{dropped}} (1 - p) \log p\Big(\frac{M_l}{1 - p}\Big) + \sum_{l \notin \text{dropped}} \log p(M_l)
    + \sum_l \log p(b_l)\Big],

every example with its own masks :math:`z_i` (standard dropout). With the Gaussian prior of scale :math:`s` the
prior term is the weight decay :math:`\lVert M_l\rVert^2 / (2 s^2 (1 - p))` (per example, divided by :math:`N`): in
the paper's parametrisation :math:`W = M' \operatorname{diag}(z)` (:math:`M' = M / (1-p)`) this is its
:math:`l^2 (1 - p) / (2N)\,\lVert M'\rVert^2` with length scale :math:`l = 1/s`, and dividing the objective by the
noise precision :math:`\tau = 1/\sigma^2` gives its :math:`\lambda = l^2 (1-p) / (2 N \tau)`, site by site (the CNN's
default prior :math:`\mathcal{N}(0, 1/\text{fan\_in})` has :math:`l^2 = \text{fan\_in}`). A Laplace or
scale-mixture prior enters the same way, through its own log density.

**The noise.** A learned Gaussian noise (the model's ``sigma`` site, ``GaussianLikelihood(scale=None)``) is
fitted jointly with the weights, without its prior, as Laplace's MAP fit does: :math:`\tau` maximises the
dropout network's expected log-likelihood, and every draw holds that value. A fixed noise is taken as given, and
the ``heteroscedastic-gaussian`` likelihood's noise is an output of the network, dropped out with it.

**Its own check, and the length.** The training objective must have stopped gaining by the end: its gain over the
last tenth of the steps at most :data:`~bnn.inference.mc_dropout.record.GAIN_LIMIT` nats per example, or within its
noise (:mod:`~bnn.inference.mc_dropout.record`); else a
:class:`~bnn.inference.diagnostics.convergence.ConvergenceWarning` says so and ``record.converged`` is false. With
neither ``steps`` nor ``epochs`` given, a training still gaining at the end of the default length goes on, a length
at a time, up to :data:`~bnn.inference.mc_dropout.options.MAX_LENGTHS` lengths: a small network on a hundred rows
(``toy1d``) needs several, the built-in data's larger sets one.

Ctrl-C or SIGTERM ends training after the current step and returns the draws of the network trained so far,
with ``record.incomplete`` and an :class:`IncompleteTrainingWarning`.
"""

from __future__ import annotations

import math
import signal
import time
import warnings
from collections.abc import Mapping

import pyro
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.map_search.log_joint import prior_distributions
from bnn.inference.mc_dropout.options import MAX_LENGTHS, DropoutInit, MCDropoutOptions
from bnn.inference.mc_dropout.record import MCDropoutRecord, still_gaining, training_trend
from bnn.models.layers import input_masks
from pyro.distributions.transforms import biject_to

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stacklevel import user_stacklevel
from bnn.runtime.stop_signals import deferred_stop_signals


class IncompleteTrainingWarning(UserWarning):
    """An MC dropout fit was interrupted and returns the network trained so far."""


def draw_masks(model, rate: float, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """Inverted-dropout masks of the units of every entry of ``model.dropped_inputs()``, ``(*shape, units)``: 0 with
    probability ``rate``, else ``1 / (1 - rate)`` (uses the global random state)."""
    keep = 1.0 - rate
    return [torch.bernoulli(torch.full((*shape, dropped.units), keep)) / keep for dropped in model.dropped_inputs()]


def masked_weights(model, weights: Mapping[str, torch.Tensor], masks: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weight draws ``(*lead, *site_shape)`` of the masks ``(*lead, units)``: the inputs of each dropped layer that
    unit ``j`` covers times ``masks[l][..., j]`` (:meth:`~bnn.models.dropout.DroppedInputs.weight_mask`), every other
    site (biases, a layer whose inputs are kept) as it is."""
    lead = masks[0].shape[:-1]
    draws = {site.name: weights[site.name].expand(*lead, *site.shape) for site in model.sites}
    for mask, dropped in zip(masks, model.dropped_inputs()):
        draws[dropped.weight.name] = weights[dropped.weight.name] * dropped.weight_mask(mask)
    return draws


def dropout_forward(model, x: torch.Tensor, weights: Mapping[str, torch.Tensor], masks: list[torch.Tensor]) -> torch.Tensor:
    """``model.forward`` with each dropped layer's input times its mask (:func:`bnn.models.layers.input_masks`):
    ``(n, units)`` for a mask per example, ``(S, 1, units)`` for one per draw (with weights ``(S, *site_shape)`` where
    the network has a convolution; the result is ``(S, n, out)`` then).

    Raises
    ------
    ValueError
        When a layer of ``model.dropped_inputs()`` was not called (its forward does not use
        :func:`~bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` under that name).
    """
    dropped_inputs = model.dropped_inputs()
    layer_masks = {dropped.weight.group: dropped.input_mask(mask) for dropped, mask in zip(dropped_inputs, masks)}
    with input_masks(layer_masks) as called:
        f = model.forward(x, weights)
    missed = sorted(set(layer_masks) - called)
    if missed:
        raise ValueError(f"{type(model).__name__}.dropped_inputs() puts dropout on the inputs of the layers {missed}, but "
                         "its forward called no bnn.models.layers.linear or conv of those names: call each such layer "
                         "as linear(h, weight, bias, name=<its weight site's group>) (or conv)")
    return f


def expected_log_prior(model, weights: Mapping[str, torch.Tensor], rate: float, distributions: dict) -> torch.Tensor:
    r""":math:`\mathbb{E}_q[\log p(W)]` up to a constant: :math:`(1-p)\log p(M/(1-p))` summed over the weight sites whose
    inputs are dropped, :math:`\log p(w)` over the others (biases, kept layers; see the module notes)."""
    keep = 1.0 - rate
    dropped = {entry.weight.name for entry in model.dropped_inputs()}
    return sum(keep * distributions[site.name].log_prob(weights[site.name] / keep).sum() if site.name in dropped
               else distributions[site.name].log_prob(weights[site.name]).sum() for site in model.sites)


def initial_weights(distributions: Mapping[str, torch.distributions.Distribution], init: DropoutInit
                    ) -> dict[str, torch.Tensor]:
    """The trained weights' start (:attr:`MCDropoutOptions.weight_init`): a draw of each site's prior, or Glorot-uniform
    weights and zero one-dimensional sites (uses the global random state)."""
    if init is DropoutInit.PRIOR:
        return {name: d.sample() for name, d in distributions.items()}
    shapes = {name: d.batch_shape + d.event_shape for name, d in distributions.items()}
    return {name: torch.nn.init.xavier_uniform_(torch.empty(shape)) if len(shape) >= 2 else torch.zeros(shape)
            for name, shape in shapes.items()}


def _batches(n: int, batch_size: int):
    """Index tensors of the minibatches, a fresh permutation each epoch (all examples, in order, for a full batch)."""
    while True:
        if batch_size >= n:
            yield slice(None)
            continue
        yield from torch.randperm(n).split(batch_size)


def _train(model, x: torch.Tensor, y: torch.Tensor, options: MCDropoutOptions, batch_size: int, weights: dict,
           unconstrained: dict, transforms: dict, distributions: dict) -> tuple[list[float], int | None]:
    """Adam on the dropout objective, updating ``weights`` and ``unconstrained`` latents in place, for one length of
    steps, and for more while the objective is still gaining where the options allow it
    (:attr:`~bnn.inference.mc_dropout.options.MCDropoutOptions.trains_on`); return the loss of every step and the
    signal (Ctrl-C, SIGTERM) that ended training early, if one did."""
    rate, length, n = options.dropout_rate, options.training_steps(x.shape[0]), x.shape[0]
    optimiser = torch.optim.Adam([*weights.values(), *unconstrained.values()], lr=options.lr)
    batches, history = _batches(n, batch_size), []

    def objective(index) -> torch.Tensor:
        """The loss of the minibatch ``index`` at fresh masks, per example (module notes)."""
        latents = {name: transforms[name](value) for name, value in unconstrained.items()}
        f = dropout_forward(model, x[index], weights, draw_masks(model, rate, (y[index].shape[0],)))
        log_likelihood = model.likelihood.distribution(f, latents).log_prob(y[index]).sum()
        return -(log_likelihood * n / f.shape[-2] + expected_log_prior(model, weights, rate, distributions)) / n

    with deferred_stop_signals() as stop:
        for lengths in range(1, (MAX_LENGTHS if options.trains_on else 1) + 1):
            if lengths > 1 and not still_gaining(training_trend(history)):
                break
            desc = "MC dropout" if lengths == 1 else f"MC dropout, still gaining: length {lengths} of at most {MAX_LENGTHS}"
            with progress_bar(range(length), desc=desc, enabled=options.progress, leave=False) as bar:
                for _ in bar:
                    step, loss = len(history), objective(next(batches))
                    if not math.isfinite(loss.item()):
                        raise ValueError(f"the MC dropout objective became {loss.item()} at step {step}; lower lr (now "
                                         f"{options.lr})")
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()
                    history.append(loss.item())
                    if step % 50 == 0:
                        bar.set_postfix(loss=f"{history[-1]:.4g}")
                    if stop.signal is not None:
                        stop.handled = True  # acted on: keep the network trained so far
                        return history, stop.signal
    return history, None


def run_mc_dropout(model, x: torch.Tensor, y: torch.Tensor, options: MCDropoutOptions) -> Posterior:
    """Train the dropout network on ``(x, y)`` and return ``num_samples`` draws of its weights (see the module notes).

    Returns
    -------
    Posterior
        Draws ``(1, num_samples, *site_shape)``; ``extras["weights"]`` holds the fitted :math:`M` and biases.

    Warns
    -----
    IncompleteTrainingWarning
        When Ctrl-C or SIGTERM ended training early.
    ConvergenceWarning
        When the training objective was still gaining at the end (:mod:`~bnn.inference.mc_dropout.record`).

    Raises
    ------
    ValueError
        When the objective becomes non-finite (lower ``lr``).
    """
    rate, n = options.dropout_rate, x.shape[0]
    batch_size = options.batch_rows(n)
    latent_priors = model.likelihood.latent_priors()
    transforms = {name: biject_to(prior.support) for name, prior in latent_priors.items()}
    began = time.perf_counter()
    with seeded(options.seed), pyro.validation_enabled(False):  # the data were checked at the edge; the loss is checked
        distributions = prior_distributions(model)
        weights = {name: value.to(x.dtype).requires_grad_(True)
                   for name, value in initial_weights(distributions, options.weight_init).items()}
        unconstrained = {name: transforms[name].inv(prior.mean.to(x.dtype)).requires_grad_(True)
                         for name, prior in latent_priors.items()}
        history, stopped_by = _train(model, x, y, options, batch_size, weights, unconstrained, transforms, distributions)
        with torch.no_grad():
            fitted = {name: value.detach() for name, value in weights.items()}
            latents = {name: transforms[name](value).detach() for name, value in unconstrained.items()}
            draws = masked_weights(model, fitted, draw_masks(model, rate, (options.num_samples,)))
    train_seconds = time.perf_counter() - began
    draws.update({name: value.expand(options.num_samples, *value.shape) for name, value in latents.items()})
    incomplete_reason = None
    if stopped_by is not None:
        length = options.training_steps(n)
        incomplete_reason = (f"interrupted ({signal.Signals(stopped_by).name}) after step {len(history)} of "
                             f"{math.ceil(len(history) / length) * length}")
        warnings.warn(f"MC dropout returns the network trained so far: {incomplete_reason}. See posterior.record.",
                      IncompleteTrainingWarning, stacklevel=4)
    record = MCDropoutRecord(
        seed=options.seed, train_seconds=train_seconds, options=options, batch_size=batch_size, steps_done=len(history),
        loss_history=history,
        noise=latents["sigma"].item() if "sigma" in latents else None, incomplete=incomplete_reason is not None,
        incomplete_reason=incomplete_reason,
    )
    if not record.incomplete:
        for problem in record.problems():  # its objective was still gaining
            warnings.warn(problem, ConvergenceWarning, stacklevel=user_stacklevel())
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record,
                     extras={"weights": fitted})
