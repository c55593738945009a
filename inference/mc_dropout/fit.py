r"""MC dropout (Gal & Ghahramani 2016): a network trained with dropout is a variational posterior over its weights.

**The draws.** Dropout on the inputs of layer :math:`l` multiplies column :math:`j` of :math:`W_l` by a mask
:math:`z_{lj} \sim \text{Bernoulli}(1 - p)`. Training uses *inverted* dropout (a kept input is scaled by
:math:`1/(1-p)`), so a draw of the weights is

.. math::

    W_l^{(s)} = M_l \operatorname{diag}\big(z_l^{(s)}\big) / (1 - p), \qquad b_l^{(s)} = b_l,

columns zeroed at rate :math:`p`, the others scaled by :math:`1/(1-p)`, so that :math:`\mathbb{E}[W_l] = M_l`:
the fitted parameters are the posterior mean, on the scale of the prior and of every other method's draws. A
draw is one set of masks shared by every input, and ``model.forward`` at the draw is the dropout network
(:func:`dropout_forward`) at those masks. Biases are not dropped: they are point estimates, as in the paper.

**The objective.** Gal & Ghahramani's KL term for this :math:`q` is, up to a constant, the prior's expected
negative log density under the masks; for the model's elementwise prior it has the closed form
:math:`\mathbb{E}_q[\log p(W_l)] = \sum_{ij} (1 - p) \log p(M_{l,ij} / (1 - p)) + p \log p(0)`, the second term a
constant. Per example the fit minimises

.. math::

    -\frac{1}{N}\Big[\frac{N}{B}\sum_{i \in \text{batch}} \log p\big(y_i \mid f(x_i; M, z_i), \sigma\big)
    + \sum_l (1 - p) \log p\Big(\frac{M_l}{1 - p}\Big) + \sum_l \log p(b_l)\Big],

every example with its own masks :math:`z_i` (standard dropout). With the Gaussian prior of scale :math:`s` the
prior term is the weight decay :math:`\lVert M_l\rVert^2 / (2 s^2 (1 - p))` (per example, divided by :math:`N`): in
the paper's parametrisation :math:`W = M' \operatorname{diag}(z)` (:math:`M' = M / (1-p)`) this is its
:math:`l^2 (1 - p) / (2N)\,\lVert M'\rVert^2` with length scale :math:`l = 1/s`, and dividing the objective by the
noise precision :math:`\tau = 1/\sigma^2` gives its :math:`\lambda = l^2 (1-p) / (2 N \tau)`. A Laplace or
scale-mixture prior enters the same way, through its own log density.

**The noise.** A learned Gaussian noise (the model's ``sigma`` site, ``GaussianLikelihood(scale=None)``) is
fitted jointly with the weights, without its prior, as Laplace's MAP fit does: :math:`\tau` maximises the
dropout network's expected log-likelihood, and every draw holds that value. A fixed noise is taken as given, and
the ``heteroscedastic-gaussian`` likelihood's noise is an output of the network, dropped out with it.

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
from bnn.inference.mc_dropout.options import MCDropoutOptions
from bnn.inference.mc_dropout.record import MCDropoutRecord
from bnn.inference.posterior_mode.log_joint import prior_distributions
from bnn.models.activations import ACTIVATIONS
from pyro.distributions.transforms import biject_to

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stop_signals import deferred_stop_signals


class IncompleteTrainingWarning(UserWarning):
    """An MC dropout fit was interrupted and returns the network trained so far."""


def draw_masks(model, rate: float, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """Inverted-dropout masks of every layer's inputs, ``(*shape, d_l)``: 0 with probability ``rate``, else
    ``1 / (1 - rate)`` (uses the global random state)."""
    keep = 1.0 - rate
    return [torch.bernoulli(torch.full((*shape, weight.shape[1]), keep)) / keep for weight, _ in model.dense_layers().layers]


def masked_weights(model, weights: Mapping[str, torch.Tensor], masks: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weight draws ``(*lead, *site_shape)`` of the masks ``(*lead, d_l)``: column ``j`` of layer ``l`` times
    ``masks[l][..., j]``, the biases as they are."""
    draws = {}
    for mask, (weight, bias) in zip(masks, model.dense_layers().layers):
        draws[weight.name] = weights[weight.name] * mask.unsqueeze(-2)
        draws[bias.name] = weights[bias.name].expand(*mask.shape[:-1], *bias.shape)
    return draws


def dropout_forward(model, x: torch.Tensor, weights: Mapping[str, torch.Tensor], masks: list[torch.Tensor]) -> torch.Tensor:
    """The dropout network at ``x`` ``(n, d_0)``: each layer's input times its mask (broadcast against the input,
    ``(n, d_l)`` for a mask per example, ``(S, 1, d_l)`` for one per draw), then the layer of ``weights``."""
    chain = model.dense_layers()
    activation = ACTIVATIONS.get(chain.activation)
    h = x
    for index, (mask, (weight, bias)) in enumerate(zip(masks, chain.layers)):
        h = torch.matmul(h * mask, weights[weight.name].transpose(-1, -2)) + weights[bias.name]
        h = h if index == len(masks) - 1 else activation(h)
    return h


def expected_log_prior(model, weights: Mapping[str, torch.Tensor], rate: float, distributions: dict) -> torch.Tensor:
    r""":math:`\mathbb{E}_q[\log p(W)]` up to a constant: :math:`(1-p)\log p(M/(1-p))` summed over the dropped weight
    sites, :math:`\log p(b)` over the biases (see the module notes)."""
    keep = 1.0 - rate
    layers = model.dense_layers().layers
    total = sum(keep * distributions[weight.name].log_prob(weights[weight.name] / keep).sum() for weight, _ in layers)
    return total + sum(distributions[bias.name].log_prob(weights[bias.name]).sum() for _, bias in layers)


def _batches(n: int, batch_size: int):
    """Index tensors of the minibatches, a fresh permutation each epoch (all examples, in order, for a full batch)."""
    while True:
        if batch_size >= n:
            yield slice(None)
            continue
        yield from torch.randperm(n).split(batch_size)


def _train(model, x: torch.Tensor, y: torch.Tensor, options: MCDropoutOptions, batch_size: int, weights: dict,
           unconstrained: dict, transforms: dict, distributions: dict) -> tuple[list[float], int | None]:
    """Adam on the dropout objective, updating ``weights`` and ``unconstrained`` latents in place; return the loss of
    every step and the signal (Ctrl-C, SIGTERM) that ended training early, if one did."""
    rate, steps, n = options.dropout_rate, options.steps, x.shape[0]
    optimiser = torch.optim.Adam([*weights.values(), *unconstrained.values()], lr=options.lr)
    batches, history = _batches(n, batch_size), []
    bar = progress_bar(range(steps), desc="MC dropout", enabled=options.progress, leave=False)
    with deferred_stop_signals() as stop, bar:
        for step in bar:
            index = next(batches)
            latents = {name: transforms[name](value) for name, value in unconstrained.items()}
            f = dropout_forward(model, x[index], weights, draw_masks(model, rate, (y[index].shape[0],)))
            log_likelihood = model.likelihood.distribution(f, latents).log_prob(y[index]).sum()
            loss = -(log_likelihood * n / f.shape[-2] + expected_log_prior(model, weights, rate, distributions)) / n
            if not math.isfinite(loss.item()):
                raise ValueError(f"the MC dropout objective became {loss.item()} at step {step}; lower lr (now {options.lr})")
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            history.append(loss.item())
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.4g}")
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

    Raises
    ------
    ValueError
        When the objective becomes non-finite (lower ``lr``).
    """
    rate, steps, n = options.dropout_rate, options.steps, x.shape[0]
    batch_size = n if options.batch_size is None else min(options.batch_size, n)
    latent_priors = model.likelihood.latent_priors()
    transforms = {name: biject_to(prior.support) for name, prior in latent_priors.items()}
    began = time.perf_counter()
    with seeded(options.seed), pyro.validation_enabled(False):  # the data were checked at the edge; the loss is checked
        distributions = prior_distributions(model)
        weights = {name: d.sample().to(x.dtype).requires_grad_(True) for name, d in distributions.items()}
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
    if len(history) < steps:
        incomplete_reason = f"interrupted ({signal.Signals(stopped_by).name}) after step {len(history)} of {steps}"
        warnings.warn(f"MC dropout returns the network trained so far: {incomplete_reason}. See posterior.record.",
                      IncompleteTrainingWarning, stacklevel=4)
    record = MCDropoutRecord(
        seed=options.seed, train_seconds=train_seconds, options=options, batch_size=batch_size, steps_done=len(history),
        loss_history=history,
        noise=latents["sigma"].item() if "sigma" in latents else None, incomplete=incomplete_reason is not None,
        incomplete_reason=incomplete_reason,
    )
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record,
                     extras={"weights": fitted})
