r"""What the comparison report says so that it does not mislead: units, an unreliable ranking, each fit's own warnings.

- **Units.** Targets are standardised for fitting, :math:`z = (y - \mu_y)/s_y`. The test metrics are converted
  back to the target's original units (:mod:`bnn.inference.evaluation.metrics`); ``elbo``,
  ``log_marginal_likelihood``, ``loo_elpd`` and ``waic_elpd`` stay in standardised units and are *sums* over the
  training points, not means: per point they differ from ``test_ll`` by :math:`\log s_y` besides being on other data.
- **An unreliable ranking.** ``az.compare`` ranks fits by PSIS-LOO. Where a training point's Pareto
  :math:`\hat k > 0.7`, the importance weights that stand in for refitting without it have so heavy a tail that
  the estimate of :math:`\log p(y_i \mid y_{-i})` cannot be trusted (Vehtari, Gelman and Gabry 2017); a fit with such
  points gets an ``elpd_loo``, and so a rank and a stacking weight, that can be far off. The report states the
  count and share per fit and marks the ranking unreliable when a ranked fit has any.
- **Each fit's own warnings**, worded with the command-line options that address them (:func:`with_flags`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.compare import BAD_PARETO_K
from bnn.inference.fit import METHODS

STANDARDISED_COLUMNS = ("elbo", "log_marginal_likelihood", "loo_elpd", "loo_se", "waic_elpd", "waic_se")


def units_lines(target_scale: float | None) -> list[str]:
    """The report's note on units; ``target_scale`` is :math:`s_y` (``None`` for classification)."""
    scale = "" if target_scale is None else f" (here s_y = {target_scale:.4g}, log s_y = {math.log(target_scale):.4g})"
    return [
        "Units: `test_rmse`, `test_ll` and the coverages are on the test split in the target's original units "
        "(`test_ll` is a mean per test point). `elbo`, `log_marginal_likelihood`, `loo_elpd` and `waic_elpd` (and their "
        "`_se`) are in standardised units, the target z = (y - mean) / s_y the fits were trained on, and are sums over "
        f"the training points: divide by their number and subtract log s_y to set them beside `test_ll`{scale}. "
        "`fit_seconds` is wall time.",
    ]


def warning_column_line(num_draws: int) -> str:
    """What ``az.compare``'s ``warning`` column means, with ArviZ's threshold for the fewest posterior draws of a ranked
    fit, ``num_draws``."""
    good_k = min(1 - 1 / math.log10(num_draws), BAD_PARETO_K) if num_draws > 10 else BAD_PARETO_K
    return (f"The `warning` column is ArviZ's: True when that fit's PSIS-LOO has at least one training point whose "
            f"Pareto k exceeds min(1 - 1/log10(S), 0.7) for its S draws ({good_k:.2f} for the fewest here, S = {num_draws}), "
            "so that its "
            "`elpd_loo`, its rank and its `weight` may be wrong. `weight` is the stacking weight of each fit in the "
            "mixture that predicts the left-out points best, not a probability that the fit is right.")


def pareto_k_lines(table: pd.DataFrame, num_points: int) -> list[str]:
    """One line per fit with points of Pareto :math:`\\hat k > 0.7`: the count and the share of ``num_points``."""
    lines = []
    for label, bad in table["loo_bad_k"].items():
        if isinstance(bad, (int, float, np.number)) and not math.isnan(bad) and bad > 0:
            lines.append(f"**Warning: {label}**: {int(bad)} of {num_points} training points "
                         f"({100 * bad / num_points:.1f}%) have Pareto k > {BAD_PARETO_K}: its PSIS-LOO and WAIC are "
                         "unreliable.")
    return lines


def ranking_verdict(ranking: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """Whether ``az.compare``'s ``ranking`` can be read, judged by the Pareto :math:`\\hat k` of the ranked fits
    in ``table``, and where its first place differs from the best test log-likelihood."""
    bad = {label: int(table.loc[label, "loo_bad_k"]) for label in ranking.index if table.loc[label, "loo_bad_k"] > 0}
    lines = []
    if bad:
        lines.append(
            f"**The ranking is unreliable**: {', '.join(f'{label} ({count} points)' for label, count in bad.items())} "
            f"{'has' if len(bad) == 1 else 'have'} training points with Pareto k > {BAD_PARETO_K}, so their `elpd_loo`, "
            "and with it the order and the stacking weights, can be far off (PSIS-LOO then tends to be too "
            "optimistic). Do not read the order as evidence: compare `test_ll` on the held-out test split, or "
            "estimate the leave-one-out density by K-fold cross-validation (refitting).")
    else:
        lines.append(f"Every ranked fit has all its Pareto k <= {BAD_PARETO_K}: the PSIS-LOO estimates behind the "
                     "ranking are reliable.")
    scores = table.loc[ranking.index, "test_ll"]
    if ranking.index[0] != scores.idxmax():
        lines.append(f"The ranking puts {ranking.index[0]} first, but {scores.idxmax()} has the best `test_ll` on the "
                     "test split: LOO judges the fit on the training data, the test split does not.")
    return lines


def option_flags() -> dict[str, str]:
    """Every method option as the command line spells it: ``map_steps`` -> ``--map-steps``."""
    return {name: "--" + name.replace("_", "-") for method in METHODS.names() for name in METHODS.get(method).options.names()
            if "_" in name}


def with_flags(text: str) -> str:
    """``text`` with every option name that holds an underscore (``map_steps``) spelled as its flag (``--map-steps``)."""
    flags = option_flags()
    return re.sub(r"\b[a-z]+(?:_[a-z]+)+\b", lambda match: flags.get(match.group(), match.group()), text)


def fit_warnings(posteriors: Mapping[str, Posterior]) -> list[str]:
    """One Markdown line per warning a fit gives about itself (its record's
    :meth:`~bnn.inference.core.record.FitRecord.problems`: SVI's ELBO still rising, a MAP off its mode, chains that
    failed, ...), in command-line terms."""
    lines = []
    for label, posterior in posteriors.items():
        lines += [f"**Warning: {label}**: {with_flags(problem)}." for problem in posterior.record.problems()]
    return lines
