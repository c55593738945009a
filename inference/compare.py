r"""One table comparing fitted posteriors (any methods, guides, priors) on the same test data.

Per fit (one row, indexed by a unique label such as ``nuts`` or ``svi (meanfield)``):

============================  =================================================================
``method``, ``guide``,        what was fitted
``prior``
``predictive``                ``mc`` or ``linearized`` (Laplace), the predictive the metrics use
``fit_seconds``               wall time of the fit
``test_rmse`` / ``test_acc…`` :func:`inference.metrics.evaluate`, in the target's original
``test_ll``, ``coverage_…``   units, with ROC-AUC (binary) and calibration (coverage of the 50%
``ece``, ``roc_auc``          and 90% predictive intervals, or expected calibration error)
``elbo``                      final ELBO of an SVI fit (a lower bound of the log evidence)
``log_marginal_likelihood``   Laplace's estimate of the log evidence
``loo_elpd``, ``loo_se``,     PSIS-LOO on the training data (ArviZ) and the number of points
``loo_bad_k``                 with Pareto :math:`\hat k > 0.7`, where the estimate is unreliable
``waic_elpd``, ``waic_se``,   WAIC and whether ArviZ warned that it may fail
``waic_warning``
``r_hat_max``, ``ess_bulk_…`` MCMC diagnostics over the weights (several chains only):
``ess_tail_min``              max R-hat, min bulk and tail ESS, and the number of divergences
``divergences``
``r_hat_predictive``          max R-hat of the predictive mean :math:`f(x^*)` over test points:
                              weights of a BNN are not identifiable (hidden units permute) so
                              chains can disagree on weights and agree on functions
``chains_agree``              ``r_hat_predictive <= 1.01``; ``False`` flags chains that disagree
============================  =================================================================

:func:`rank` is ArviZ's own ``az.compare`` (PSIS-LOO stacking weights) over the same fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import arviz as az
import numpy as np
import pandas as pd

from bnn_data.dataset import Dataset
from inference.arviz_quiet import quiet_arviz
from inference.metrics import evaluate
from inference.posterior import Posterior

R_HAT_THRESHOLD = 1.01
BAD_PARETO_K = 0.7


def label_fits(posteriors: Sequence[Posterior] | Mapping[str, Posterior]) -> dict[str, Posterior]:
    """Unique labels: the method, with the guide for SVI, and a counter for repeats."""
    if isinstance(posteriors, Mapping):
        return dict(posteriors)
    labels: dict[str, Posterior] = {}
    for posterior in posteriors:
        base = posterior.method if posterior.method != "svi" else f"svi ({posterior.info.get('guide')})"
        label, count = base, 2
        while label in labels:
            label, count = f"{base} #{count}", count + 1
        labels[label] = posterior
    return labels


def prior_name(posterior: Posterior) -> str:
    """The model's prior as ``name`` or ``name, layers.1: other`` for per-layer priors."""
    table = posterior.model.config()["prior"]
    return ", ".join(cfg["name"] if key == "*" else f"{key}: {cfg['name']}" for key, cfg in table.items())


def information_criteria(idata: az.InferenceData) -> dict[str, float]:
    """PSIS-LOO and WAIC of the training data, with their reliability counts."""
    with quiet_arviz(reported=True):
        loo = az.loo(idata, pointwise=True)
        waic = az.waic(idata)
    return {
        "loo_elpd": float(loo.elpd_loo), "loo_se": float(loo.se),
        "loo_bad_k": int((np.asarray(loo.pareto_k) > BAD_PARETO_K).sum()),
        "waic_elpd": float(waic.elpd_waic), "waic_se": float(waic.se), "waic_warning": bool(waic.warning),
    }


def predictive_r_hat(posterior: Posterior, dataset: Dataset) -> float:
    """Max over test points of R-hat of the network output, chains as drawn."""
    f = posterior.predict(dataset.x_test).f  # (chains * draws, n, out)
    chains = f.reshape(posterior.num_chains, posterior.num_draws, -1).numpy()
    return float(max(az.rhat(chains[..., j]) for j in range(chains.shape[-1])))


def chain_diagnostics(posterior: Posterior, idata: az.InferenceData, dataset: Dataset) -> dict[str, float]:
    """R-hat and ESS over the weights, divergences, and the function-space R-hat (several chains only)."""
    nan = math.nan
    if posterior.num_chains < 2:
        return {"r_hat_max": nan, "ess_bulk_min": nan, "ess_tail_min": nan, "r_hat_predictive": nan,
                "divergences": _divergences(idata), "chains_agree": None}
    summary = az.summary(idata, kind="diagnostics")
    r_hat_predictive = predictive_r_hat(posterior, dataset)
    return {
        "r_hat_max": float(summary["r_hat"].max()), "ess_bulk_min": float(summary["ess_bulk"].min()),
        "ess_tail_min": float(summary["ess_tail"].min()), "r_hat_predictive": r_hat_predictive,
        "divergences": _divergences(idata), "chains_agree": bool(r_hat_predictive <= R_HAT_THRESHOLD),
    }


def _divergences(idata: az.InferenceData) -> float:
    if "sample_stats" in idata.groups() and "diverging" in idata.sample_stats:
        return int(idata.sample_stats["diverging"].values.sum())
    return math.nan


def compare(posteriors: Sequence[Posterior] | Mapping[str, Posterior], test_data: Dataset) -> pd.DataFrame:
    """The comparison table described in the module docstring, one row per fit."""
    rows = {}
    for label, posterior in label_fits(posteriors).items():
        idata = posterior.to_inference_data()
        rows[label] = {
            "method": posterior.method,
            "guide": posterior.info.get("guide"),
            "prior": prior_name(posterior),
            "predictive": posterior.default_predictive.value,
            "fit_seconds": posterior.info.get("train_seconds", math.nan),
            **evaluate(posterior, test_data),
            "elbo": posterior.info.get("final_elbo", math.nan),
            "log_marginal_likelihood": posterior.info.get("log_marginal_likelihood", math.nan),
            **information_criteria(idata),
            **chain_diagnostics(posterior, idata, test_data),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def rank(posteriors: Sequence[Posterior] | Mapping[str, Posterior]) -> pd.DataFrame:
    """ArviZ's ``az.compare`` ranking of the fits by PSIS-LOO on the training data."""
    data = {label: p.to_inference_data() for label, p in label_fits(posteriors).items()}
    with quiet_arviz(reported=True):
        return az.compare(data)
