r"""One table comparing fitted posteriors (any methods, guides, priors) on the same test data.

Per fit (one row, indexed by a unique label such as ``nuts`` or ``svi (meanfield)``):

============================  =================================================================
``method``, ``guide``,        what was fitted
``prior``
``predictive``                ``mc`` or ``linearized`` (Laplace), the predictive the metrics use
``fit_seconds``               wall time of the fit
``test_rmse``/``test_acc…``   :func:`bnn.inference.evaluation.metrics.evaluate`, in the target's original
``test_ll``, ``coverage_…``   units, with ROC-AUC (binary), calibration (coverage and width of the 50%
``ece``, ``roc_auc``, ...     and 90% predictive intervals, CRPS and PIT calibration error; or Brier
                              score, ECE and MCE), the entropy split and ``aurc`` (selective prediction)
``elbo``                      final ELBO of an SVI fit (a lower bound of the log evidence)
``log_marginal_likelihood``   Laplace's estimate of the log evidence
``loo_elpd``, ``loo_se``,     PSIS-LOO on the training data (ArviZ) and the number of points
``loo_bad_k``                 with Pareto :math:`\hat k > 0.7`, where the estimate is unreliable
``waic_elpd``, ``waic_se``,   WAIC and whether ArviZ warned that it may fail
``waic_warning``
``r_hat_max``/``ess_bulk_…``  MCMC diagnostics over the weights (NUTS only, unrounded): max
``ess_tail_min``              rank-normalised split R-hat (several chains), min bulk and tail
``divergences``               ESS (one chain too), the number of divergences
``converged``                 the chains' own verdict (:mod:`bnn.inference.diagnostics.convergence`): two or
                              more chains, none failed, no divergence, ``r_hat_predictive``
                              :math:`\le 1.01`, ``ess_predictive_min`` :math:`\ge` 100 per chain
``r_hat_predictive``          max R-hat of the network output :math:`f(x)` over the training inputs
                              (:mod:`bnn.inference.diagnostics.convergence`, as ``fit_nuts`` reports it):
                              weights of a BNN are not identifiable (hidden units permute) so
                              chains can disagree on weights and agree on functions
``ess_predictive_min``        min bulk ESS of the same predictive quantities (chains together)
``chains_agree``              ``r_hat_predictive <= 1.01``; ``False`` flags chains that disagree
============================  =================================================================

:func:`rank` is ArviZ's own ``az.compare`` (PSIS-LOO stacking weights) over the same fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.record import FitRecord
from bnn.inference.diagnostics.convergence import ChainDiagnostics
from bnn.inference.evaluation.metrics import evaluate

from bnn.runtime.arviz_quiet import quiet_arviz
from bnn.runtime.lazy_arviz import az

BAD_PARETO_K = 0.7


def label_fits(posteriors: Sequence[Posterior] | Mapping[str, Posterior]) -> dict[str, Posterior]:
    """Unique labels: each record's :attr:`~bnn.inference.core.record.FitRecord.label` (the method, with the guide for
    SVI), and a counter for repeats."""
    if isinstance(posteriors, Mapping):
        return dict(posteriors)
    labels: dict[str, Posterior] = {}
    for posterior in posteriors:
        base = posterior.record.label
        label, count = base, 2
        while label in labels:
            label, count = f"{base} #{count}", count + 1
        labels[label] = posterior
    return labels


def prior_name(posterior: Posterior) -> str:
    """The model's prior as ``name`` or ``name, layers.1: other`` for per-layer priors."""
    table = posterior.model.prior_config()
    return ", ".join(cfg["name"] if key == "*" else f"{key}: {cfg['name']}" for key, cfg in table.items())


def information_criteria(posterior: Posterior) -> dict[str, float]:
    """PSIS-LOO (:meth:`~bnn.inference.core.posterior.Posterior.loo`) and WAIC of the training data, with their
    reliability counts; NaN for a point estimate (one draw: both average over posterior draws)."""
    if posterior.num_chains * posterior.num_draws < 2:
        return {"loo_elpd": math.nan, "loo_se": math.nan, "loo_bad_k": math.nan,
                "waic_elpd": math.nan, "waic_se": math.nan, "waic_warning": None}
    with quiet_arviz(reported=True):
        loo = posterior.loo()
        waic = az.waic(posterior.to_inference_data())
    return {
        "loo_elpd": float(loo.elpd_loo), "loo_se": float(loo.se),
        "loo_bad_k": int((np.asarray(loo.pareto_k) > BAD_PARETO_K).sum()),
        "waic_elpd": float(waic.elpd_waic), "waic_se": float(waic.se), "waic_warning": bool(waic.warning),
    }


CHAIN_COLUMNS = ("r_hat_max", "ess_bulk_min", "ess_tail_min", "r_hat_predictive", "ess_predictive_min", "divergences")
"""The numbers of :class:`~bnn.inference.diagnostics.convergence.ChainDiagnostics` the table shows (NaN for other methods)."""


def chain_diagnostics(record: FitRecord) -> dict[str, Any]:
    """The convergence checks a Markov-chain method recorded at fit time
    (:class:`~bnn.inference.diagnostics.convergence.ChainDiagnostics`:
    R-hat over the weights and over the predictive with several chains, ESS of the weights and of the predictive,
    divergences, the verdict and whether the
    chains agree on the predictions); NaN and ``None`` for methods whose draws are independent."""
    diagnostics = getattr(record, "diagnostics", None)
    if not isinstance(diagnostics, ChainDiagnostics):
        return {**dict.fromkeys(CHAIN_COLUMNS, math.nan), "converged": None, "chains_agree": None}
    values = {name: getattr(diagnostics, name) for name in CHAIN_COLUMNS}
    nan_if_none = {name: math.nan if value is None else value for name, value in values.items()}
    return {**nan_if_none, "converged": diagnostics.converged, "chains_agree": diagnostics.chains_agree}


def compare(posteriors: Sequence[Posterior] | Mapping[str, Posterior], test_data: Dataset) -> pd.DataFrame:
    """The comparison table described in the module docstring, one row per fit.

    Parameters
    ----------
    posteriors : sequence of Posterior, or mapping of label to Posterior
        Fits of any methods, guides and priors on ``test_data``'s training split; a sequence is labelled by
        :func:`label_fits`.
    test_data : Dataset
        The data the fits were trained on: test metrics on its test split, LOO and WAIC on the training split
        the posteriors carry.

    Returns
    -------
    pandas.DataFrame
        One row per fit, indexed by its label, with the columns of the module docstring (regression or
        classification metrics as ``test_data``'s task has them).
    """
    rows = {}
    for label, posterior in label_fits(posteriors).items():
        measures = posterior.record.metrics()
        rows[label] = {
            "method": posterior.method,
            "guide": posterior.record.guide,
            "prior": prior_name(posterior),
            "predictive": posterior.default_predictive.value,
            "fit_seconds": posterior.record.train_seconds,
            **evaluate(posterior, test_data),
            "elbo": measures.get("final_elbo", math.nan),
            "log_marginal_likelihood": measures.get("log_marginal_likelihood", math.nan),
            **information_criteria(posterior),
            **chain_diagnostics(posterior.record),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


RANKING_COLUMNS = ("rank", "elpd_loo", "p_loo", "elpd_diff", "weight", "se", "dse", "warning", "scale")
"""The columns of ``az.compare``'s table."""


def rank(posteriors: Sequence[Posterior] | Mapping[str, Posterior]) -> pd.DataFrame:
    r"""ArviZ's ``az.compare`` ranking of the fits by PSIS-LOO on the training data.

    Parameters
    ----------
    posteriors : sequence of Posterior, or mapping of label to Posterior
        Fits on the same training data (labelled as in :func:`compare`); point estimates (one draw, such as
        ``method="map"``) are left out: PSIS-LOO needs posterior draws; with none left the table is empty.

    Returns
    -------
    pandas.DataFrame
        ``az.compare``'s table, best first: ``elpd_loo`` :math:`= \sum_i \log p(y_i \mid y_{-i})`, its
        difference to the best and standard errors, and the stacking ``weight`` (summing to 1); its columns are
        :data:`RANKING_COLUMNS`.
    """
    fits = {label: p for label, p in label_fits(posteriors).items() if p.num_chains * p.num_draws > 1}
    if not fits:  # az.compare of nothing raises KeyError: an empty ranking instead
        return pd.DataFrame(columns=RANKING_COLUMNS)
    with quiet_arviz(reported=True):
        return az.compare({label: p.loo() for label, p in fits.items()})  # each fit's LOO, computed once
