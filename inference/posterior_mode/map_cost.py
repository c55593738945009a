r"""The cost of fits centred on MAP estimates (the MAP method, Laplace, the deep ensemble), counted before they run.

Each MAP fit takes :math:`A` Adam steps and at most :math:`L` polish iterations of at least one gradient each, for
the final MAP and for each of at most :math:`E` MAP refits of the search for the evidence's maximum
(:mod:`bnn.inference.posterior_mode.hyperparameter_search`), where the evidence chooses the prior precision
(Laplace's default) or a learned noise (Gaussian priors): :math:`A + L(1 + E)` gradients on the full data, a worst
case; an ensemble of :math:`M` members :math:`M` times that.
"""

from __future__ import annotations

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.posterior_mode.evidence_search import MAX_EVALUATIONS
from bnn.inference.posterior_mode.log_joint import evidence_possible
from bnn.inference.posterior_mode.map_estimate import MAP_MAX_ITER

from bnn.options import Options


def map_fits_count(options: Options, model, *, members: int = 1, parallel: int = 1, tuned: bool = False) -> GradientCount:
    """The worst-case gradients of ``members`` MAP fits under ``options`` (``map_steps``, and ``map_max_iter`` where the
    method has it, else the MAP fit's default); ``tuned``: the evidence chooses the prior precision; ``model`` tells
    whether it chooses a learned noise too."""
    polish = getattr(options, "map_max_iter", MAP_MAX_ITER)
    learned_noise = model is not None and bool(model.likelihood.latent_priors()) and evidence_possible(model, 0)
    rounds = MAX_EVALUATIONS if tuned or learned_noise else 0
    tuning = f" + up to {rounds} evidence search fits x {polish}" if rounds else ""
    return GradientCount(members * (options.map_steps + polish * (1 + rounds)), parallel, "worst case",
                         f"{members} x ({options.map_steps} Adam steps + at most {polish} polish iterations{tuning})")
