r"""The MAP on minibatches: epochs of Adam on the per-example negative log joint, the unit of work of a plain training.

.. math::

    \theta_{MAP} = \arg\min_\theta \; -\frac{1}{N}\Big[\frac{N}{B}\sum_{i \in \text{batch}} \log p(y_i \mid x_i,
    \theta, \sigma) + \log p(\theta)\Big]

by Adam on minibatches of :math:`B` rows, a fresh permutation each epoch, for ``epochs`` epochs from the given start
(by default :func:`minibatch_epochs`), its rate falling from ``lr`` to near zero on a cosine
(:mod:`bnn.inference.core.cosine_schedule`), in float32 (a polish needs float64; this fit has none). A learned
Gaussian noise is fitted with the weights (its log, without its prior) and set at the end to its maximum-likelihood
value given the weights, the root mean square residual over all rows.

**The regime.** :func:`~bnn.inference.map_search.map_estimate.find_map` runs this instead of full-batch Adam and its
polish wherever the full-batch fit is not cheap (:func:`~bnn.inference.core.full_batch_work.full_batch_affordable`:
the full-batch gradients of Adam's steps and of a typical polish, :data:`FULL_BATCH_GRADIENTS` beyond the steps, over
all :math:`N` rows, counted in floating-point operations). The count depends on the network and the data's size only,
so the same fit takes the same regime on every machine and at every load.

**Its length.** With :math:`M = \lceil N / B \rceil` steps an epoch, the default is
:math:`E = \min(\text{EPOCHS}, \lceil \text{MOST\_STEPS} / M \rceil)` epochs (:data:`EPOCHS`, :data:`MOST_STEPS`):
on small data the epochs bind (MNIST-1D's 4,000 rows: 32 steps an epoch, 200 epochs, which its check needs), on large
data the steps (UCI protein's 41,157 rows: 322 steps an epoch, 100 epochs; MNIST-1D-40k: 103), which there pass
the check with a test log-likelihood at least a plain training's (benchmarks/results/training_cost.md).

**Its own check.** Two things must hold at the end. The objective, one minibatch estimate a step, must have flattened:
its rise between the last two windows of a tenth of the run's learning rate each at most
:data:`~bnn.inference.core.objective_trend.FLAT_SHARE` of its rise over the whole run
(:attr:`bnn.inference.core.objective_trend.ObjectiveTrend.flat`). And the full gradient at the end must lie within
the batches' noise: at most :data:`~bnn.inference.map_search.gradient_noise.NOISE_RATIO` of one batch's gradient
spread (:mod:`bnn.inference.map_search.gradient_noise`). The exact MAP is further (a network's training objective
keeps creeping up for many epochs, by more than a minibatch's own noise), so the check asks that the fit have made
nearly all the progress its run can make and have come to rest where its steps can no longer tell the way up. Each
half catches what the other misses (``benchmarks/results/map_check.md``, five starts each): on MNIST-1D's CNN a run at a
hundredth of the rate rises as concavely as a healthy one (its share within the healthy range) but ends with a
gradient 0.13-0.15 of its noise, against at most 0.037 for healthy runs; on UCI protein such a run ends with a healthy
gradient ratio while its objective still climbs. A run too short to judge (fewer than two windows) is not converged,
and the estimate says so (:attr:`~bnn.inference.map_search.map_estimate.MapEstimate.converged`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.inference.core.objective_trend import ObjectiveTrend, objective_trend
from bnn.inference.core.training_length import steps_per_epoch
from bnn.inference.map_search.advice import nonfinite_objective
from bnn.inference.map_search.log_joint import ScaledPrior, log_likelihood

from bnn.runtime.progress import progress_bar

EPOCHS, MOST_STEPS, LR = 200, 32_000, 0.01
"""The minibatch MAP's defaults (on :data:`~bnn.inference.core.full_batch_work.BATCH_SIZE` rows a step): its most
epochs, its most steps (:func:`minibatch_epochs`) and Adam's peak rate, chosen on MNIST-1D, MNIST-1D-40k and UCI
protein so that the MAP's own check passes and its test log-likelihood is at least a plain training's
(benchmarks/results/training_cost.md runs them; benchmarks/results/map_check.md checks the check on five starts)."""
MINIBATCH_POLISH = "none: minibatch Adam"
"""How a MAP fit's record (``map_polish``) begins where it ran on minibatches, with no polish."""
FULL_BATCH_GRADIENTS = 2000
"""The full-batch gradients a typical polish costs beyond Adam's steps (its iterations times their several
gradients each), for :func:`~bnn.inference.core.full_batch_work.full_batch_affordable`."""


@dataclass(frozen=True)
class MinibatchFit:
    """The end of a minibatch MAP fit.

    Attributes
    ----------
    theta : torch.Tensor
        The weights at the end, ``(D,)`` in the dtype of the data given.
    objective : list of float
        The objective of every step (negated: higher is better).
    epochs : int
        The epochs run.
    trend : ObjectiveTrend or None
        The objective's trend over the last two windows (``None``: a run too short to judge).
    """

    theta: torch.Tensor
    objective: list[float]
    epochs: int
    trend: ObjectiveTrend | None

    @property
    def flat(self) -> bool:
        """Whether the objective had flattened at the end (module notes; ``False`` for a run too short to judge)."""
        return self.trend is not None and self.trend.flat


def minibatch_epochs(rows: int, batch_size: int) -> int:
    r"""The default epochs on ``rows`` rows in batches of ``batch_size``:
    :math:`\min(\text{EPOCHS}, \lceil \text{MOST\_STEPS} / M \rceil)` (module notes)."""
    return min(EPOCHS, math.ceil(MOST_STEPS / steps_per_epoch(rows, batch_size)))


def minibatch_map(model, x: torch.Tensor, y: torch.Tensor, prior: ScaledPrior, theta: torch.Tensor, latents: dict,
                  log_noise: dict, *, epochs: int | None, batch_size: int, lr: float, progress: bool) -> MinibatchFit:
    """Adam on minibatches from ``theta`` for ``epochs`` epochs (``None``: :func:`minibatch_epochs`; module notes),
    the noise held at ``latents`` or fitted as ``log_noise`` (updated in place); the global random state draws the
    batches.

    Raises
    ------
    FloatingPointError
        When the objective becomes non-finite, naming the step and what to lower.
    """
    rows, dtype = x.shape[0], x.dtype
    epochs = minibatch_epochs(rows, batch_size) if epochs is None else epochs
    work = torch.float32
    x_work = x.to(work)
    y_work = y.to(work) if y.is_floating_point() else y
    weights = theta.detach().to(work).requires_grad_(True)
    fitted = {name: value.detach().to(work).requires_grad_(True) for name, value in log_noise.items()}
    adam = torch.optim.Adam([weights, *fitted.values()], lr=lr)
    objective = []
    factors = cosine_factors(epochs * math.ceil(rows / batch_size))
    bar = progress_bar(range(len(factors)), desc="MAP (minibatch Adam)", enabled=progress, leave=False)
    with bar:
        for _ in range(epochs):
            for index in torch.randperm(rows).split(batch_size):
                for group in adam.param_groups:
                    group["lr"] = lr * factors[len(objective)]
                adam.zero_grad()
                noise = {name: value.exp() for name, value in fitted.items()} or {
                    name: value.to(work) for name, value in latents.items()}
                scale = rows / index.shape[0]
                loss = -(scale * log_likelihood(model, x_work[index], y_work[index], weights, noise)
                         + prior.log_prob(weights)) / rows
                if not math.isfinite(loss.item()):
                    raise FloatingPointError(nonfinite_objective(model, x_work[index], weights.detach(), loss.item(),
                                                                 len(objective), lr, "map_batch_lr"))
                loss.backward()
                adam.step()
                objective.append(-loss.item())
                bar.update()
    for name, value in fitted.items():
        log_noise[name].data.copy_(value.detach().to(log_noise[name].dtype))
    return MinibatchFit(weights.detach().to(dtype), objective, epochs, objective_trend(objective, factors))
