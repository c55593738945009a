r"""IVON (Shen et al. 2024, "Variational learning is effective for large deep networks"): a mean-field Gaussian
posterior learned at the cost of Adam, by the maintained ``ivon-opt`` package's ``IVON`` optimiser.

**The posterior.** :math:`q(\theta) = \prod_k \mathcal{N}(\theta_k;\, m_k,\, 1/(N (h_k + \delta_k)))`, with
:math:`m` the mean, :math:`h` a running estimate of the expected Hessian of the per-example negative
log-likelihood :math:`\bar\ell(\theta) = -\frac{1}{N}\sum_i \log p(y_i \mid x_i, \theta)` (Price's theorem: the
gradient at a draw times the draw's standardised noise), :math:`N` the training rows (IVON's effective sample size)
and :math:`\delta_k` the prior's precision per example. Each step draws the weights from :math:`q`, takes the
gradient of :math:`\bar\ell` on a minibatch there, and updates

.. math::

    g \leftarrow \beta_1 g + (1 - \beta_1)\hat g, \qquad
    h \leftarrow \beta_2 h + (1 - \beta_2)\hat h + \tfrac12 (1 - \beta_2)^2 (h - \hat h)^2 / (h + \delta), \qquad
    m \leftarrow m - \alpha_t \frac{g / (1 - \beta_1^t) + \delta m}{h + \delta},

the natural-gradient step of the ELBO :math:`\mathbb{E}_q[\log p(y \mid x, \theta)] - \mathrm{KL}(q \,\|\, p)` under the
prior :math:`p(\theta_k) = \mathcal{N}(0, 1/(N \delta_k))`. The model's prior must be that: a zero-mean Gaussian with
one scale :math:`s` per site (``gaussian``, fan-in scaled or not), so :math:`\delta = 1/(N s^2)`, each site a
parameter group of IVON; another prior is refused before any work. The rate :math:`\alpha_t` falls from ``lr`` to
zero along a cosine over the run's ``epochs``.

**The noise.** A learned Gaussian noise (``GaussianLikelihood(scale=None)``) is a point fitted with the weights by
Adam on :math:`\bar\ell` at the same draws (as MC dropout's is), and every draw holds it.

**Its own check.** The training objective, :math:`-\bar\ell` on each step's minibatch at its draw, must have
flattened by the end, as the minibatch MAP's must: its gain over the last tenth of the run's learning rate at most
:data:`~bnn.inference.core.objective_trend.FLAT_SHARE` of its rise over the run
(:attr:`bnn.inference.core.objective_trend.ObjectiveTrend.flat`; a test of the gain against its noise alone passed a
run at a hundredth of the default rate, which had barely moved); else a
:class:`~bnn.inference.diagnostics.convergence.ConvergenceWarning` says so and ``record.converged`` is false. A
non-finite objective stops the fit naming the step and the option to lower.
"""

from __future__ import annotations

import math
import time
import warnings

import torch
from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.ivon.options import IVONOptions
from bnn.inference.ivon.record import IVONRecord
from bnn.models.fast_forms import NormalForm
from ivon import IVON
from pyro.distributions.transforms import biject_to

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stacklevel import user_stacklevel


def prior_precisions(model, rows: int) -> dict[str, float]:
    r""":math:`\delta` of each site, :math:`1/(N s^2)` for its zero-mean Gaussian prior of scale :math:`s` (module
    notes); ``ValueError`` naming the site for any other prior."""
    precisions = {}
    for site in model.sites:
        prior = model.prior[site.name]
        form = prior.fast_form(site)
        scale = None if not isinstance(form, NormalForm) else form.scale.reshape(-1)
        if scale is None or form.loc.abs().max() > 0 or (scale != scale[0]).any():
            raise ValueError(f"method 'ivon' needs a zero-mean Gaussian prior with one scale per site (its weight decay), "
                             f"and site {site.name!r} has {type(prior).__name__}; use prior='gaussian', or another method "
                             "(svi fits any prior)")
        precisions[site.name] = 1.0 / (rows * float(scale[0]) ** 2)
    return precisions


def run_ivon(model, x: torch.Tensor, y: torch.Tensor, options: IVONOptions) -> Posterior:
    """Train the mean-field Gaussian of the weights by IVON on ``(x, y)`` and return ``num_samples`` draws of it (see
    the module notes).

    Raises
    ------
    ValueError
        Before any work for a prior that is not a zero-mean Gaussian; during the fit when the objective becomes
        non-finite (lower ``lr``).
    """
    rows = x.shape[0]
    precisions = prior_precisions(model, rows)
    batch_size, steps = options.batch_rows(rows), options.training_steps(rows)
    latent_priors = model.likelihood.latent_priors()
    transforms = {name: biject_to(prior.support) for name, prior in latent_priors.items()}
    began = time.perf_counter()
    with seeded(options.seed):
        means = {site.name: ((torch.rand(site.shape, dtype=x.dtype) * 2 - 1) / math.sqrt(site.fan_in)).requires_grad_()
                 for site in model.sites}  # as PyTorch starts its layers: uniform on +-1/sqrt(fan-in)
        latents = {name: transforms[name].inv(prior.mean.to(x.dtype)).requires_grad_(True)
                   for name, prior in latent_priors.items()}
        ivon = IVON([{"params": [means[name]], "weight_decay": precisions[name]} for name in means], lr=options.lr,
                    ess=float(rows), hess_init=options.hess_init, beta1=options.beta1, beta2=options.beta2,
                    mc_samples=options.mc_samples,
                    clip_radius=math.inf if options.clip_radius is None else options.clip_radius)
        noise = torch.optim.Adam(list(latents.values()), lr=0.01) if latents else None
        factors = cosine_factors(steps)
        history = []
        bar = progress_bar(range(steps), desc="IVON", enabled=options.progress, leave=False)
        with bar:
            for step, index in zip(bar, _batches(rows, batch_size)):
                for group in ivon.param_groups:
                    group["lr"] = options.lr * factors[step]
                if noise is not None:
                    noise.zero_grad()
                total = 0.0
                for _ in range(options.mc_samples):
                    with ivon.sampled_params(train=True):
                        ivon.zero_grad()
                        values = {name: transforms[name](value) for name, value in latents.items()}
                        loss = -model.likelihood.distribution(model.forward(x[index], means), values).log_prob(
                            y[index]).mean()
                        loss.backward()
                    total += loss.item() / options.mc_samples
                if not math.isfinite(total):
                    raise ValueError(f"IVON's objective became {total} at step {step}; lower lr (now {options.lr})")
                ivon.step()
                if noise is not None:
                    noise.step()
                history.append(-total)
                if step % 50 == 0:
                    bar.set_postfix(loss=f"{total:.4g}")
        draws, standard_deviations = _draws(model, ivon, means, options.num_samples)
        fitted_latents = {name: transforms[name](value).detach() for name, value in latents.items()}
    train_seconds = time.perf_counter() - began
    draws.update({name: value.expand(options.num_samples, *value.shape) for name, value in fitted_latents.items()})
    record = IVONRecord(seed=options.seed, train_seconds=train_seconds, guide="ivon", options=options,
                        batch_size=batch_size, steps_done=len(history), objective=history,
                        noise=fitted_latents["sigma"].item() if "sigma" in fitted_latents else None)
    for problem in record.problems():  # its objective had not flattened
        warnings.warn(problem, ConvergenceWarning, stacklevel=user_stacklevel())
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record,
                     extras={"mean": {name: value.detach() for name, value in means.items()},
                             "standard_deviation": standard_deviations})


def _batches(rows: int, batch_size: int):
    """Index tensors of the minibatches, a fresh permutation each epoch (the global random state), forever."""
    while True:
        yield from torch.randperm(rows).split(batch_size)


def _draws(model, ivon: IVON, means: dict[str, torch.Tensor], count: int) -> tuple[dict, dict]:
    r"""``count`` draws of each site from :math:`q` and its standard deviations :math:`1/\sqrt{N (h + \delta)}`."""
    draws, deviations = {}, {}
    for group, (name, mean) in zip(ivon.param_groups, means.items()):
        deviation = (group["ess"] * (group["hess"] + group["weight_decay"])).rsqrt().reshape(mean.shape)
        deviations[name] = deviation.detach()
        draws[name] = (mean.detach() + deviation * torch.randn(count, *mean.shape, dtype=mean.dtype)).detach()
    return draws, deviations
