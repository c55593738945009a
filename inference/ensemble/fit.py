r"""Deep ensembles (Lakshminarayanan et al. 2017): :math:`M` MAP fits from independent initialisations.

Member :math:`m` maximises the log joint :math:`\log p(y \mid x, \theta) + \log p(\theta)` under the model's
own prior (a Gaussian's weight decay, a Laplace prior's L1, a scale mixture alike) from its own draw of the prior,
with :func:`~bnn.inference.map_search.map_estimate.find_map` (Adam, then a Levenberg-Marquardt or L-BFGS polish, in float64
as Laplace does); a learned Gaussian noise is chosen as there (the Laplace evidence's under a Gaussian prior). Each
member is one draw, so the :class:`~bnn.inference.core.posterior.Posterior` holds one "chain" of :math:`M` independent draws,
``(1, M, *site_shape)``, and its Monte Carlo predictive is the paper's uniform mixture of the members. With
the ``heteroscedastic-gaussian`` likelihood every member predicts a mean and a scale per input, the paper's
setting (its adversarial training is not done here).

The members are :mod:`bnn.inference.map_search.map_starts`' fits: seeds from ``numpy.random.SeedSequence(seed)``,
run in loky worker processes (one per core, each on one torch thread) or one after the other on one torch thread,
with the same members either way. A script that fits in processes must guard its entry point with
``if __name__ == "__main__":``.

Faults lose only their own member: a member whose fit raises is reported in ``record.failed_members`` while
the others go on (only when every member fails does the fit raise, with the first member's error). Ctrl-C or
SIGTERM keeps the members already finished (the running ones are stopped) with ``record.incomplete`` and
an :class:`IncompleteEnsembleWarning`; it raises ``KeyboardInterrupt`` again when none had finished.
"""

from __future__ import annotations

import time
import warnings

import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.core.posterior import Posterior
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.ensemble.record import EnsembleRecord
from bnn.inference.map_search.advice import members_not_converged
from bnn.inference.map_search.map_estimate import working_data
from bnn.inference.map_search.map_starts import MemberJob, MemberOutcomes, member_seeds, run_members


class IncompleteEnsembleWarning(UserWarning):
    """An ensemble returns fewer members than asked: a member failed, or the run was interrupted."""


def _kept(outcomes: MemberOutcomes, num_members: int) -> tuple[list[int], dict[str, object]]:
    """The members to keep and the record's fault entries; warns when members are missing.

    Raises
    ------
    KeyboardInterrupt
        The interrupt, again, when it came before any member finished.
    Exception
        The first member's error when every member failed.
    """
    kept = sorted(outcomes.fits)
    if not kept:
        if outcomes.interrupt is not None:
            raise outcomes.interrupt
        raise outcomes.failures[min(outcomes.failures)]
    faults: dict[str, object] = {}
    problems = []
    if outcomes.failures:
        faults["failed_members"] = {str(member): f"{type(error).__name__}: {error}"
                                    for member, error in sorted(outcomes.failures.items())}
        problems += [f"member {member} failed ({text})" for member, text in faults["failed_members"].items()]
    if outcomes.interrupt is not None:
        cause = type(outcomes.interrupt).__name__ + (f": {outcomes.interrupt}" if str(outcomes.interrupt) else "")
        faults["incomplete"] = True
        faults["incomplete_reason"] = f"interrupted ({cause}); kept members {kept} of {num_members}"
        problems.append(faults["incomplete_reason"])
    if problems:
        warnings.warn(f"the ensemble returns {len(kept)} of {num_members} members: " + "; ".join(problems) +
                      ". See posterior.record.", IncompleteEnsembleWarning, stacklevel=5)
    return kept, faults


def run_ensemble(model, x: torch.Tensor, y: torch.Tensor, options: EnsembleOptions) -> Posterior:
    """Fit the :math:`M` members and return them as the draws ``(1, M_kept, *site_shape)`` of a posterior.

    Warns
    -----
    IncompleteEnsembleWarning
        When a member failed or the run was interrupted (the posterior holds the members that finished).
    RuntimeWarning
        When a member's MAP fit stopped above ``map_tolerance``.
    """
    seeds = member_seeds(options.seed, options.num_members)
    jobs = [MemberJob(member, seeds[member], options.map_fit_arguments(), torch.get_default_dtype())
            for member in range(options.num_members)]
    workers = options.workers()
    x_work, y_work = working_data(x, y)

    began = time.perf_counter()
    outcomes = run_members(model, x_work, y_work, jobs, workers, options.progress)
    train_seconds = time.perf_counter() - began
    kept, faults = _kept(outcomes, options.num_members)
    fits = [outcomes.fits[member] for member in kept]
    if not all(fit.converged for fit in fits):
        stalled = [member for member, fit in zip(kept, fits) if not fit.converged]
        warnings.warn(members_not_converged("the MAP fits of ensemble", stalled, fits[0].minibatch,
                                            options.map_tolerance), RuntimeWarning, stacklevel=4)

    draws = split_flat(model.sites, torch.stack([fit.theta for fit in fits]).to(x.dtype))
    draws.update({name: torch.stack([fit.latents[name] for fit in fits]).to(x.dtype)
                  for name in model.likelihood.latent_priors()})
    record = EnsembleRecord(
        seed=options.seed, train_seconds=train_seconds, options=options,
        member_method="parallel" if workers > 1 else "sequential", member_seeds=seeds, members_kept=kept,
        member_seconds=[fit.seconds for fit in fits], map_lbfgs_iterations=[fit.lbfgs_iterations for fit in fits],
        map_grad_norms=[fit.grad_norm for fit in fits], map_converged=[fit.converged for fit in fits],
        map_minibatch=fits[0].minibatch,
        noise=[fit.latents["sigma"].item() for fit in fits] if "sigma" in fits[0].latents else None, **faults,
    )
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record)
