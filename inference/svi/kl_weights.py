r"""How much of the KL term each minibatch step carries (Blundell et al. 2015, section 3.4).

An epoch cuts the data :math:`\mathcal{D}` into :math:`M` minibatches :math:`\mathcal{D}_i`.
Blundell et al. minimise per minibatch

.. math::

    \mathcal{F}_i = \pi_i \,\mathrm{KL}(q \,\|\, p) - \mathbb{E}_q[\log p(\mathcal{D}_i \mid w)],
    \qquad \sum_{i=1}^M \pi_i = 1,

so that :math:`\sum_i \mathcal{F}_i` is the negative ELBO of the full data. The model's
``data`` plate already multiplies a minibatch's log-likelihood by :math:`N/|B|`, so SVI
minimises, at step :math:`i` of an epoch,

.. math::

    \mathcal{L}_i = M\pi_i \,\mathrm{KL}(q \,\|\, p) - \frac{N}{|B|}\log p(\mathcal{D}_i \mid w)
    \;(= M \mathcal{F}_i \text{ when } N = M|B|),

by scaling the log-densities of every latent site, in the model and in the guide, by
:math:`c_i = M\pi_i` (:class:`ScaleKL`). With ``uniform`` weights :math:`c_i = 1`: plain SVI.
Here :math:`M = \lfloor N/|B| \rfloor` (SVI uses equal batches; the :math:`N - M|B|`
examples left over change with each epoch's shuffle) and :math:`i = 1, \dots, M`.

The weights of every epoch sum to 1 for ``uniform`` and ``blundell``; ``warmup`` anneals
the KL in, so by design its epochs sum to less than 1 during the warm-up and to exactly 1
after it.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from pyro.poutine.messenger import Messenger


class KLWeighting(str, Enum):
    """The KL weight :math:`\\pi_i` of minibatch :math:`i` of :math:`M` (global step :math:`t = 0, 1, \\dots`)."""

    UNIFORM = "uniform"
    """:math:`\\pi_i = 1/M`: every step carries an equal share of the KL (plain SVI)."""
    BLUNDELL = "blundell"
    """:math:`\\pi_i = 2^{M-i}/(2^M - 1)`: the first batches of each epoch carry most of the KL
    (the prior dominates early in the epoch, the data later); the weights halve batch by batch."""
    WARMUP = "warmup"
    r""":math:`\pi_t = \beta_t / M` with :math:`\beta_t = \min(1, (t+1)/W)`: the KL is annealed in
    linearly over the first :math:`W` steps, then weighted uniformly. An epoch's weights sum
    to the mean of :math:`\beta_t` over its steps. By design (annealing) that sum is below 1
    during the warm-up, so those epochs do not minimise the negative ELBO but a tempered
    objective with less KL; it is exactly 1 for every epoch that starts at
    :math:`t \ge W - 1`, from where on the weights are ``uniform``'s."""

    def weight(self, *, batch: int, num_batches: int, step: int, warmup_steps: int) -> float:
        r"""The KL weight :math:`\pi` of one minibatch step.

        .. math::

            \pi = \begin{cases}
            1/M & \text{uniform,} \\
            2^{M-i}/(2^M - 1) & \text{blundell,} \\
            \min\big(1, (t+1)/W\big)/M & \text{warmup,}
            \end{cases}

        so that :math:`\sum_{i=1}^M \pi_i = 1` over an epoch for ``uniform`` and ``blundell``,
        and for ``warmup`` once the epoch starts at :math:`t \ge W - 1` (below 1 before, by design).

        Parameters
        ----------
        batch : int
            The minibatch's place in its epoch, 0-based, so :math:`i` = ``batch + 1``.
        num_batches : int
            :math:`M`, the minibatches per epoch.
        step : int
            :math:`t`, the global step (0-based); used by ``warmup`` only.
        warmup_steps : int
            :math:`W`, the warm-up's length in steps; used by ``warmup`` only.

        Returns
        -------
        float
            :math:`\pi`, in :math:`(0, 1]`. SVI scales the KL of the step by :math:`M\pi`.
        """
        if self is KLWeighting.UNIFORM:
            return 1.0 / num_batches
        if self is KLWeighting.BLUNDELL:
            # 2^(M-i) / (2^M - 1) = 2^(-i) / (1 - 2^(-M)), which cannot overflow for large M
            return math.ldexp(1.0, -(batch + 1)) / -math.expm1(-num_batches * math.log(2.0))
        return min(1.0, (step + 1) / warmup_steps) / num_batches


class ScaleKL(Messenger):
    """Multiplies the log-density of every latent (not observed) sample site by ``scale``.

    Applied to both the model and the guide, it multiplies the ELBO's KL estimate
    :math:`\\log q - \\log p` (or an analytic KL a guide puts in its sites' log-densities)
    by ``scale`` and leaves the likelihood alone.
    """

    def __init__(self, scale: torch.Tensor | float) -> None:
        super().__init__()
        self.scale = scale

    def _pyro_sample(self, msg) -> None:
        if not msg["is_observed"]:
            msg["scale"] = self.scale * msg["scale"]


def kl_scaled(fn):
    """``fn(x, y, num_data=...)`` as ``fn(x, y, kl_scale, num_data=...)`` under :class:`ScaleKL`.

    ``kl_scale`` is a positional tensor so that ``JitTrace_ELBO`` takes it as an input of the
    compiled graph rather than freezing the first step's value.
    """

    def scaled(x, y, kl_scale, num_data=None):
        with ScaleKL(kl_scale):
            return fn(x, y, num_data=num_data)

    return scaled
