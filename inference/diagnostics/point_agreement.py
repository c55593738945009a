r"""Where a run's chains agree on the predictions: the predictive R-hat at each test input.

A run of Markov chains on a network of this size often leaves its chains in different modes, and its draws are then
pooled into one posterior (Izmailov et al. 2021, "What are Bayesian neural network posteriors really like?", run
many chains from different starts and pool them). Whether a pooled predictive is the posterior's or the run's is read
input by input: the rank-normalised split :math:`\hat{R}` of the network's output at each test input :math:`x_i`,

.. math::

    \hat{R}_i = \max_k \hat{R}\big(\{f_k(x_i; W_{c,d})\}_{c,d}\big),

the largest over the outputs :math:`k`, and the share of the test inputs where :math:`\hat{R}_i \le 1.1` (Izmailov
et al.'s reading, and Gelman and Rubin's original threshold) and :math:`\le 1.01` (Vehtari et al. 2021's, the one the
convergence verdict of :mod:`bnn.inference.diagnostics.convergence` applies to the training inputs). A share near 1 says
the chains tell the same story where the model is tested; a low one, that the test metrics average over modes that
disagree there (which may still predict well, as an ensemble does, but is not yet the posterior).
"""

from __future__ import annotations

import numpy as np
import torch
from bnn.inference.diagnostics.rank_diagnostics import split_r_hat

THRESHOLDS = (1.1, 1.01)
AGREEMENT_COLUMNS = ("test_r_hat_max", "test_r_hat_within_1_1", "test_r_hat_within_1_01")
"""The agreement of a run of two or more chains at the test inputs: the largest :math:`\\hat{R}_i`, then the share of
the test inputs within each of :data:`THRESHOLDS`."""


def point_r_hats(posterior, x: torch.Tensor) -> np.ndarray:
    r""":math:`\hat{R}_i` at each row of ``x`` (module notes) for ``posterior``'s draws ``(chains >= 2, draws, ...)``,
    shape ``(n,)``; NaN at an input whose outputs are constant over the draws.

    Raises
    ------
    ValueError
        For fewer than two chains (R-hat compares chains).
    """
    if posterior.num_chains < 2:
        raise ValueError(f"the R-hat at each input needs two or more chains, the posterior has {posterior.num_chains}; "
                         "run more chains")
    f = posterior.network_outputs(x, "mc").to(torch.float64).cpu().numpy()  # (chains, draws, n, outputs)
    r_hat = split_r_hat(f.reshape(*f.shape[:2], -1)).reshape(f.shape[2:])  # constant draws give NaN
    return np.max(r_hat, axis=-1)


def agreement_at_inputs(posterior, x: torch.Tensor) -> dict[str, float | None]:
    """:data:`AGREEMENT_COLUMNS` of ``posterior`` at the test inputs ``x``; ``None`` each for a posterior of one chain
    (a method without chains, or one chain). A NaN :math:`\\hat{R}_i` counts as outside every threshold."""
    if posterior.num_chains < 2:
        return dict.fromkeys(AGREEMENT_COLUMNS)
    r_hat = point_r_hats(posterior, x)
    within = [float(np.mean(r_hat <= threshold)) for threshold in THRESHOLDS]  # NaN <= t is False
    return dict(zip(AGREEMENT_COLUMNS, [float(np.max(r_hat)), *within]))
