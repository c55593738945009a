r"""How noisy SVI's gradient is: the variance of the ELBO's gradient estimator at a guide's current parameters.

SVI follows a stochastic estimate :math:`\hat g(\varepsilon) = \nabla_\phi \hat{\mathcal{L}}(\phi; \varepsilon)`
of the gradient of the negative ELBO, one draw of the reparameterisation noise :math:`\varepsilon` (and of
the minibatch) per step. Every estimator SVI offers is unbiased, :math:`\mathbb{E}_\varepsilon[\hat g] =
\nabla_\phi(-\mathcal{L})`, so they differ only in their variance

.. math::

    \operatorname{Var}[\hat g_k] = \mathbb{E}\big[(\hat g_k - \mathbb{E}\hat g_k)^2\big], \qquad
    \operatorname{tr}\operatorname{Cov}[\hat g] = \sum_k \operatorname{Var}[\hat g_k],

which sets how small a step Adam must take: the closed-form KL removes the KL's Monte Carlo noise
(:mod:`bnn.guides.kl`), local reparameterisation gives each example its own noise
(:mod:`bnn.guides.meanfield`). :func:`gradient_variance` measures both quantities from :math:`S`
independent draws of :math:`\hat g` at fixed :math:`\phi`, with the pair of model and guide that SVI
optimises (the guide's ``elbo_pair()`` where it has one) and uniform KL weights.

The :math:`S` draws fall into :math:`G = 10` consecutive groups :math:`\mathcal{G}_1, \dots,
\mathcal{G}_G`. The variance of each entry is pooled within the groups,

.. math::

    \widehat{\operatorname{Var}}[\hat g_k] = \frac{1}{S - G}\sum_{j=1}^{G}\sum_{s \in \mathcal{G}_j}
    \big(\hat g_k^{(s)} - \bar g_{k,j}\big)^2,

unbiased, and the spread of the groups' own traces :math:`T_j` gives the Monte Carlo standard error of
the trace, :math:`\operatorname{sd}(T_1, \dots, T_G)/\sqrt{G}` (batch means).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyro
import torch
from bnn.inference.core.model_data import check_model, checked_data
from bnn.inference.svi.fitted_guide import FittedGuide
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.objective import elbo_loss, svi_pair
from pyro import poutine

from bnn.options import integer, optional, positive_int
from bnn.options import seed as seed_parser
from bnn.runtime.seeding import seeded

GROUPS = 10
"""The groups of draws whose spread gives the standard error of the trace."""


@dataclass(frozen=True)
class GradientVariance:
    r"""The moments of the gradient estimator :math:`\hat g` of the negative ELBO, per guide parameter.

    Attributes
    ----------
    mean : dict of str to torch.Tensor
        :math:`\bar g`, the mean of the draws, by parameter-store name, shaped like the parameter
        (its unconstrained value, the one Adam updates), in float64.
    variance : dict of str to torch.Tensor
        :math:`\widehat{\operatorname{Var}}[\hat g_k]`, pooled within the groups (module docstring), same keys and shapes.
    num_draws : int
        :math:`S`, the independent gradient draws.
    total : float
        :math:`\sum_k \widehat{\operatorname{Var}}[\hat g_k]`, the trace of the estimator's covariance.
    standard_error : float
        The Monte Carlo standard error of ``total`` (batch means over the groups).
    """

    mean: dict[str, torch.Tensor]
    variance: dict[str, torch.Tensor]
    num_draws: int
    total: float
    standard_error: float

    @property
    def mean_variance(self) -> float:
        r"""The variance per parameter entry, :math:`\frac1K\sum_k \widehat{\operatorname{Var}}[\hat g_k]` over all
        :math:`K` entries."""
        return self.total / sum(value.numel() for value in self.variance.values())


class GroupedMoments:
    r"""Running means and sums of squared deviations of flat vectors, in :data:`GROUPS` groups, by Welford's update

    .. math::

        \bar g \leftarrow \bar g + (g - \bar g)/n, \qquad
        M_2 \leftarrow M_2 + (g - \bar g_\text{old})(g - \bar g_\text{new}).
    """

    def __init__(self, size: int) -> None:
        self.count = torch.zeros(GROUPS, dtype=torch.float64)
        self.mean = torch.zeros(GROUPS, size, dtype=torch.float64)
        self.m2 = torch.zeros(GROUPS, size, dtype=torch.float64)

    def add(self, group: int, value: torch.Tensor) -> None:
        """Add one draw ``value`` (shape ``(size,)``) to ``group``."""
        self.count[group] += 1
        delta = value - self.mean[group]
        self.mean[group] += delta / self.count[group]
        self.m2[group] += delta * (value - self.mean[group])

    def pooled(self) -> tuple[torch.Tensor, torch.Tensor, float, float]:
        """The overall mean, the pooled variance of every entry, their sum and its batch-means standard error."""
        n = self.count.sum()
        mean = (self.count[:, None] * self.mean).sum(0) / n
        variance = self.m2.sum(0) / (n - GROUPS)
        group_traces = self.m2.sum(1) / (self.count - 1)
        return mean, variance, float(variance.sum()), float(group_traces.std() / math.sqrt(GROUPS))


def gradient_variance(model, guide, x, y, *, num_draws: int = 1000, batch_size: int | None = None,
                      num_particles: int = 1, seed: int = 0) -> GradientVariance:
    r"""Measure the mean and variance of SVI's gradient estimator at ``guide``'s current parameters.

    Each draw evaluates the negative-ELBO estimate of ``num_particles`` reparameterised draws on a minibatch
    (``batch_size`` examples drawn without replacement, the likelihood scaled by :math:`N/|B|`; the full data
    without ``batch_size``) and differentiates it with respect to every parameter of the trace
    (:func:`torch.autograd.grad`: no ``.grad`` is written, no parameter changes). What estimator that is
    belongs to the guide: ``MeanFieldGuide(model, kl="closed-form" | "monte-carlo", local_reparameterisation=...)``.

    Parameters
    ----------
    model : BayesianNetwork
        The model.
    guide : callable
        A guide of ``model``: a built guide (a ``PyroModule``'s own current values; an autoguide's parameters are
        initialised on the first draw) or the ``posterior.extras["guide"]`` of an SVI fit
        (:class:`~bnn.inference.svi.fitted_guide.FittedGuide`: its fitted values). It runs in a parameter store of
        its own, so a hand-written guide whose ``pyro.param`` values live only in Pyro's global store starts from
        their initial values.
    x, y : array-like
        The training data, :math:`N` rows.
    num_draws : int
        :math:`S \ge 20` independent gradient draws (two per group at least).
    batch_size : int, optional
        :math:`|B| \le N` examples per draw (default: all of them).
    num_particles : int
        Reparameterised draws averaged in each ELBO estimate (vectorised, as in SVI).
    seed : int
        Seeds every draw; the caller's random state is left as it was.

    Returns
    -------
    GradientVariance
        Per-parameter mean and variance, their trace and its standard error.

    Raises
    ------
    TypeError
        For a ``model`` that is not a :class:`~bnn.models.network.BayesianNetwork` or a ``guide`` that is not callable.
    ValueError
        For bad data, ``num_draws`` below 20, a ``batch_size`` above :math:`N` or another bad option, before
        any draw; for a guide with no parameters, at the first draw.
    """
    check_model(model)
    if not callable(guide):
        raise TypeError(f"guide must be a guide callable such as MeanFieldGuide(model) or posterior.extras['guide'], "
                        f"got {type(guide).__name__}")
    x, y = checked_data(model, x, y)
    n = x.shape[0]
    num_draws = integer(minimum=2 * GROUPS)("num_draws", num_draws)
    batch_size = optional(integer(minimum=1, maximum=n))(f"batch_size (at most the {n} examples)", batch_size)
    loss = elbo_loss(positive_int("num_particles", num_particles), jit=False)
    svi_model, svi_guide = svi_pair(model, guide, KLWeighting.UNIFORM)
    scope = guide.own_parameters() if isinstance(guide, FittedGuide) else pyro.get_param_store().scope()
    with seeded(seed_parser("seed", seed)), scope:
        moments, shapes = None, {}
        for draw in range(num_draws):
            if batch_size is None or batch_size == n:
                arguments, num_data = (x, y), None
            else:
                index = torch.randperm(n)[:batch_size]
                arguments, num_data = (x[index], y[index]), n
            gradients = loss_gradient(loss, svi_model, svi_guide, *arguments, num_data=num_data)
            if moments is None:
                shapes = {name: gradient.shape for name, gradient in gradients.items()}
                moments = GroupedMoments(sum(gradient.numel() for gradient in gradients.values()))
            moments.add(draw * GROUPS // num_draws, torch.cat([g.reshape(-1) for g in gradients.values()]).double())
    mean, variance, total, standard_error = moments.pooled()
    return GradientVariance(unflatten(mean, shapes), unflatten(variance, shapes), num_draws, total, standard_error)


def loss_gradient(loss, model, guide, *arguments, num_data: int | None) -> dict[str, torch.Tensor]:
    """One draw of the gradient of ``loss``'s estimate with respect to every parameter it reads (unconstrained, by
    parameter-store name; zero for a parameter the estimate does not depend on).

    Raises
    ------
    ValueError
        When the model and guide read no parameter.
    """
    with poutine.trace(param_only=True) as capture:
        value = loss.differentiable_loss(model, guide, *arguments, num_data=num_data)
    parameters = {name: site["value"].unconstrained() for name, site in capture.trace.nodes.items()}
    if not parameters:
        raise ValueError("the guide has no parameters, so there is no gradient to measure: pass a guide with "
                         "learnable parameters, such as MeanFieldGuide(model)")
    gradients = torch.autograd.grad(value, list(parameters.values()), allow_unused=True)
    return {name: torch.zeros_like(p) if g is None else g for (name, p), g in zip(parameters.items(), gradients)}


def unflatten(flat: torch.Tensor, shapes: dict[str, torch.Size]) -> dict[str, torch.Tensor]:
    """``flat`` cut into tensors of the given shapes, in order."""
    parts = torch.split(flat, [math.prod(shape) for shape in shapes.values()])
    return {name: part.reshape(shape) for (name, shape), part in zip(shapes.items(), parts)}
