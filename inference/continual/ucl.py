r"""Uncertainty-guided continual learning (``ucl``; Ebrahimi et al. 2020, "UCB" in their paper): Bayes by Backprop
on each task, each weight's mean learning at a rate scaled by its posterior standard deviation after the last task.

On task :math:`t` the mean-field Gaussian :math:`q(W) = \prod_k \mathcal{N}(\mu_k, \sigma_k^2)`,
:math:`\sigma = \operatorname{softplus}(\rho)`, continues from :math:`q_{t-1}` (means and scales) and minimises
VCL's negative ELBO, the previous posterior the prior (:class:`~bnn.inference.continual.setup.ContinualSetup`:
the first prior :math:`\mathcal{N}(0, s^2)` on the first task and for heads no task has reached),

.. math::

    \mathcal{L}(\mu, \rho) = -\mathbb{E}_q[\log p(\mathcal{D}_t \mid W)] + \mathrm{KL}(q \,\|\, q_{t-1}),

the KL in closed form, one reparameterised draw :math:`W = \mu + \sigma \odot \epsilon` per step, Adam at the
constant rate ``lr``. The method's own part is the rate: the mean :math:`\mu_k` learns at :math:`\mathrm{lr}\,
c_k` with :math:`c_k = \sigma_{t-1,k} / s`, so a weight the earlier tasks pinned down (small
:math:`\sigma_{t-1,k}`) barely moves and an uncertain one learns freely; the :math:`\rho` learn at ``lr``, and so
do the means on the first task and those of heads no task has reached. Adam with rate :math:`\mathrm{lr}\, c_k` is
Adam at ``lr`` on :math:`u` with :math:`\mu = \mu_{t-1} + c \odot u`, :math:`u_0 = 0` (Adam's step does not
depend on the scale of a gradient, so :math:`u` steps as :math:`\mu` would at ``lr`` and :math:`\mu` moves
:math:`c_k` times as far); that is how it is computed.

The authors' code keeps its first prior (a scale mixture) on every task, with the KL down-weighted a thousandfold
against the likelihood. With the full KL to the first prior :math:`\mathcal{N}(0, s^2)` instead of
:math:`q_{t-1}`, the scales of the weights the data do not constrain grow toward :math:`s` and the method forgets
more than fine-tuning does, hence the previous posterior as the prior (chosen on split and permuted digits:
``benchmarks/results/continual.md``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from bnn.guides.flat_weights import join_sites
from bnn.guides.kl import gaussian_kl
from bnn.inference.continual.flat_gaussian import FlatGaussian, unlearnt_heads
from bnn.inference.continual.learned import Learned
from bnn.inference.continual.setup import ContinualSetup
from bnn.inference.map_search.log_joint import log_likelihood, prior_distributions
from bnn.inference.svi.optimiser import ADAM_BETAS


def prior_moments(model) -> FlatGaussian:
    """The Gaussian prior of every weight site of ``model`` as flat means and scales (the order of ``model.sites``)."""
    priors = prior_distributions(model)
    return FlatGaussian(join_sites(model.sites, {name: prior.loc for name, prior in priors.items()}),
                        join_sites(model.sites, {name: prior.scale for name, prior in priors.items()}))


def mean_rate_scale(setup: ContinualSetup, model, task: int, start: FlatGaussian) -> torch.Tensor:
    r""":math:`c_k = \sigma_{t-1,k} / s` for each weight; 1 on the first task and for heads no task has reached."""
    if task == 0:
        return torch.ones_like(start.std)
    return torch.where(unlearnt_heads(setup, model, task), torch.ones_like(start.std), start.std / setup.options.prior_scale)


def ucl(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """UCL's step on task ``task`` from ``carry["posterior"]``, :math:`q_{t-1}` (absent for the first task)."""
    options, carried = setup.options, carry.get("posterior")
    model = setup.model(setup.prior_for(task, carried))
    prior = prior_moments(model)
    generator = torch.Generator().manual_seed(options.seed + task)
    start = FlatGaussian.start(model, carried, F.softplus(torch.tensor(options.init_rho)).item(), generator)
    scale = mean_rate_scale(setup, model, task, start)
    x, y = setup.train_data(task)
    step = torch.zeros_like(start.mean, requires_grad=True)
    rho = (start.std.expm1().log()).requires_grad_(True)  # softplus^-1
    adam = torch.optim.Adam([step, rho], lr=options.lr, betas=ADAM_BETAS)
    for index in range(options.steps):
        adam.zero_grad()
        mean, std = start.mean + scale * step, F.softplus(rho)
        theta = mean + std * torch.randn(mean.shape, generator=generator, dtype=mean.dtype)
        kl = gaussian_kl(mean, std, prior.std, prior.mean).sum()
        loss = (kl - log_likelihood(model, x, y, theta, {})) / x.shape[0]
        if not torch.isfinite(loss):
            raise FloatingPointError(f"ucl: the negative ELBO became {loss.item()} at step {index} of task {task}; "
                                     f"lower lr (now {options.lr})")
        loss.backward()
        adam.step()
    learnt = FlatGaussian((start.mean + scale * step).detach(), F.softplus(rho).detach())
    return Learned(learnt.predictor(setup, model, options.seed + task), {"posterior": learnt.config(model, "ucl")})

