r"""The Bayesian continual methods: the posterior of task :math:`t` is the prior of task :math:`t + 1`.

``vcl``
    Variational continual learning (Nguyen et al. 2018): the mean-field Gaussian guide (Bayes by Backprop) on each
    task, :math:`q_t = \arg\min_q \mathrm{KL}(q \,\|\, q_{t-1}) - \mathbb{E}_q[\log p(\mathcal{D}_t \mid W)]`, its
    means starting at :math:`q_{t-1}`'s; ``steps`` Adam steps at the constant rate ``lr`` (not SVI's decaying
    default: the rate the options state).
``vcl-coreset``
    VCL with a random coreset :math:`C_t` of ``coreset_size`` examples of each task: the propagated posterior
    :math:`\tilde q_t` learns :math:`\mathcal{D}_t \setminus C_t` under :math:`\tilde q_{t-1}`, and before prediction
    a second fit learns the whole coreset :math:`C_1 \cup \dots \cup C_t` under :math:`\tilde q_t`. That prediction
    posterior is not carried on (every example enters the chain of posteriors once).
``online-laplace``
    Online Laplace (Ritter et al. 2018): the diagonal (GGN) Laplace approximation at the MAP of each task under the
    previous Laplace posterior, :math:`\Lambda_t = \operatorname{diag}(H_t) + \Lambda_{t-1}`.
"""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.continual.learned import Learned, posterior_predictor
from bnn.inference.continual.setup import ContinualSetup, starting_means
from bnn.inference.core.posterior import Posterior
from bnn.inference.fit import fit


def _svi(setup: ContinualSetup, task: int, prior, data: tuple[torch.Tensor, torch.Tensor], init_loc) -> Posterior:
    options = setup.options
    return fit(setup.model(prior), data, method="svi", guide="meanfield",
               guide_options={"init_loc": init_loc, "init_rho": options.init_rho}, steps=options.steps, lr=options.lr,
               lr_schedule="constant", num_samples=options.num_samples, seed=options.seed + task, progress=False)


def _carried_on(setup: ContinualSetup, task: int, posterior: Posterior, carry: dict[str, Any]) -> Learned:
    return Learned(posterior_predictor(posterior, setup.options.seed + task), carry, posterior)


def vcl(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """VCL's step on task ``task`` from ``carry["prior"]``, the config of :math:`q_{t-1}` (absent for the first)."""
    previous = carry.get("prior")
    posterior = _svi(setup, task, setup.prior_for(task, previous), setup.train_data(task), starting_means(previous))
    return _carried_on(setup, task, posterior, {"prior": posterior.as_prior().config()})


def vcl_coreset(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """VCL with a coreset: ``carry`` holds :math:`\\tilde q_{t-1}` and the coreset's rows of each earlier task."""
    previous = carry.get("prior")
    coreset = {int(key): rows for key, rows in carry.get("coreset", {}).items()}
    size = setup.benchmark.tasks[task].y_train.shape[0]
    if setup.options.coreset_size >= size:
        raise ValueError(f"coreset_size={setup.options.coreset_size} leaves none of the {size} training examples of "
                         f"task {task} to propagate; use a smaller coreset")
    order = torch.randperm(size, generator=torch.Generator().manual_seed(setup.options.seed + task))
    coreset[task] = sorted(order[: setup.options.coreset_size].tolist())
    propagation = _svi(setup, task, setup.prior_for(task, previous),
                       setup.train_data(task, order[setup.options.coreset_size:]), starting_means(previous))
    propagated = propagation.as_prior().config()
    replay = [setup.train_data(past, torch.tensor(rows)) for past, rows in sorted(coreset.items())]
    replayed = (torch.cat([x for x, _ in replay]), torch.cat([y for _, y in replay]))
    prediction = _svi(setup, task, setup.prior_for(task + 1, propagated), replayed, starting_means(propagated))
    return _carried_on(setup, task, prediction,
                       {"prior": propagated, "coreset": {str(key): rows for key, rows in coreset.items()}})


def online_laplace(setup: ContinualSetup, task: int, carry: dict[str, Any]) -> Learned:
    """Online Laplace's step on task ``task`` from ``carry["prior"]``, the previous Laplace posterior's diagonal."""
    options = setup.options
    model = setup.model(setup.prior_for(task, carry.get("prior")))
    posterior = fit(model, setup.train_data(task), method="laplace", hessian="ggn", structure="diag",
                    map_steps=options.steps, map_lr=options.lr, num_samples=options.num_samples,
                    seed=options.seed + task, progress=False, tune_prior_precision=False)  # the prior is the method's
    return _carried_on(setup, task, posterior, {"prior": posterior.as_prior().config()})
