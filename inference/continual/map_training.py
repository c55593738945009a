r"""The two non-Bayesian reference points: a MAP network fine-tuned task by task, and one trained on all tasks.

Both maximise :math:`\log p(\mathcal{D} \mid W) + \log p(W)` with the first prior :math:`\mathcal{N}(0, s^2)`
(weight decay :math:`1/(2s^2)`) by ``steps`` full-batch Adam steps:

``finetune``
    on task :math:`t`'s data only, starting at task :math:`t - 1`'s weights: nothing protects the old tasks, the
    lower bound of forgetting;
``joint``
    on the data of tasks :math:`0..t` together, from a fresh start: no forgetting by construction, the upper bound.

A fresh start draws every weight from :math:`\mathcal{N}(0, 0.1^2)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.inference.continual.learned import Learned
from bnn.inference.continual.setup import ContinualSetup
from bnn.inference.map_search.log_joint import log_likelihood, log_prior, prior_distributions
from bnn.models.network import BayesianNetwork

from bnn.runtime.seeding import seeded

START_SD = 0.1


def train_map(model: BayesianNetwork, x: torch.Tensor, y: torch.Tensor, start: Mapping[str, torch.Tensor] | None, *,
              steps: int, lr: float) -> dict[str, torch.Tensor]:
    r"""The weights after ``steps`` Adam steps on :math:`-\frac1n[\log p(y \mid x, W) + \log p(W)]` from ``start``
    (a draw of :math:`\mathcal{N}(0, 0.1^2)` when ``None``, from torch's global random state)."""
    if start is None:
        start = {site.name: START_SD * torch.randn(site.shape) for site in model.sites}
    distributions = prior_distributions(model)
    theta = join_sites(model.sites, {name: torch.as_tensor(v) for name, v in start.items()}).to(x.dtype).requires_grad_(True)
    adam = torch.optim.Adam([theta], lr=lr)
    for step in range(steps):
        adam.zero_grad()
        loss = -(log_likelihood(model, x, y, theta, {}) + log_prior(model, theta, distributions)) / x.shape[0]
        if not torch.isfinite(loss):
            raise FloatingPointError(f"the MAP objective became {loss.item()} at step {step}; lower lr (now {lr})")
        loss.backward()
        adam.step()
    return split_flat(model.sites, theta.detach())


def _map_learned(setup: ContinualSetup, model: BayesianNetwork, weights: dict[str, torch.Tensor]) -> Learned:
    def predict(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            f = model.forward(x, weights)
        return f.softmax(-1) if setup.benchmark.is_classification else f[..., 0]

    return Learned(predict, {"weights": {name: value.tolist() for name, value in weights.items()}})


def finetune(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """Task ``task`` from the weights ``carry["weights"]`` of the previous task (a fresh start for the first)."""
    model = setup.model()
    with seeded(setup.options.seed + task):
        weights = train_map(model, *setup.train_data(task), carry.get("weights"), steps=setup.options.steps,
                            lr=setup.options.lr)
    return _map_learned(setup, model, weights)


def joint(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """Tasks ``0..task`` together from a fresh start (``carry`` unused: the data are the state)."""
    model = setup.model()
    seen = [setup.train_data(past) for past in range(task + 1)]
    with seeded(setup.options.seed + task):
        weights = train_map(model, torch.cat([x for x, _ in seen]), torch.cat([y for _, y in seen]), None,
                            steps=setup.options.steps, lr=setup.options.lr)
    learned = _map_learned(setup, model, weights)
    return Learned(learned.predict)
