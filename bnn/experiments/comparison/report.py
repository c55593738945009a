"""Write a comparison of fits to disk: table, ranking, plots, netCDF posteriors and a Markdown report."""

from __future__ import annotations

import math
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import torch

from bnn.datasets.dataset import Dataset
from bnn.experiments.comparison.reference import reference_distances
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import R_HAT_THRESHOLD
from bnn.inference.evaluation.calibration_plots import plot_pit, plot_selective
from bnn.inference.evaluation.compare import compare, rank
from bnn.inference.evaluation.conformal import calibration_rank
from bnn.inference.evaluation.ood import auroc_columns, map_baseline_lines, ood_table
from bnn.inference.evaluation.plots import plot_fit, plot_predictive_overlay, plot_std_vs_error
from bnn.inference.evaluation.posterior_plots import plot_forest, plot_marginals_vs_prior, plot_trace
from bnn.inference.evaluation.reliability import (
    fit_warnings,
    pareto_k_lines,
    ranking_verdict,
    units_lines,
    warning_column_line,
)
from bnn.inference.evaluation.set_coverage import SET_LEVEL_ALPHA, set_coverage
from bnn.inference.evaluation.shift_sets import ShiftSplit
from bnn.inference.fit import METHODS
from bnn.runtime.atomic import atomic_directory
from bnn.runtime.machine import machine
from bnn.runtime.progress import stages

PACKAGES = ("torch", "pyro-ppl", "nutpie", "arviz", "numpy", "pandas", "matplotlib", "scikit-learn")
TABLE_COLUMNS = (
    "method", "guide", "prior", "predictive", "fit_seconds", "test_rmse", "test_accuracy", "test_ll", "roc_auc", "coverage_50",
    "coverage_90", "ece", "elbo", "log_marginal_likelihood", "loo_elpd", "loo_se", "loo_bad_k", "waic_elpd",
    "waic_se", "waic_warning", "r_hat_max", "r_hat_predictive", "ess_predictive_min", "ess_bulk_min", "ess_tail_min",
    "divergences", "converged", "chains_agree",
)


def slug(label: str) -> str:
    """A file-name-safe form of a fit label: ``svi (meanfield)`` -> ``svi-meanfield``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a GitHub Markdown table, with its index as the first column."""
    header = ["", *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([str(index), *map(_cell, row)]) + " |" for index, row in zip(frame.index, frame.values)]
    return "\n".join(lines)


OTHER_CHAIN_ADVICE = "raise --num-warmup and --num-samples."
NO_RANKING = ("No ranking: PSIS-LOO needs posterior draws, and every fit here is a point estimate (one draw); add a "
              "method that draws (svi, nuts, laplace, ...) to rank the fits.")
"""What a Markov-chain method without advice of its own (:attr:`~bnn.inference.core.method.Method.advice`) should try."""


def chain_advice(method: str) -> str:
    """What a Markov-chain fit of ``method`` that did not converge should try: the method's own
    :attr:`~bnn.inference.core.method.Method.advice`, else :data:`OTHER_CHAIN_ADVICE` (a method registered elsewhere)."""
    advice = METHODS.get(method).advice if method in METHODS else None
    return advice or OTHER_CHAIN_ADVICE


def convergence_warnings(table: pd.DataFrame) -> list[str]:
    """One Markdown line per Markov-chain fit of ``table`` (from :func:`~bnn.inference.evaluation.compare.compare`) that
    did not converge, with its R-hat, ESS and divergences and, since label switching makes weight R-hat overstate a
    BNN's problem, its predictive R-hat and ESS, then what to try (:func:`chain_advice`). Methods without chains
    (``converged`` is ``None``) have no line."""
    lines = []
    for label, row in table[table["converged"].map(lambda verdict: verdict is False)].iterrows():
        r_hat = _cell(row["r_hat_max"]) or "n/a (one chain)"
        if math.isnan(row["r_hat_predictive"]):
            verdict = "n/a: it needs two or more chains"
        else:
            agree = "the chains agree on the predictions" if row["chains_agree"] else "the chains disagree on the predictions too"
            verdict = f"{_cell(row['r_hat_predictive'])} ({agree})"
        lines.append(
            f"**Warning: {label} did not converge**: max R-hat {r_hat} (threshold {R_HAT_THRESHOLD}), min bulk ESS "
            f"{_cell(row['ess_bulk_min'])}, min tail ESS {_cell(row['ess_tail_min'])}, {int(row['divergences'])} divergences. "
            "BNN weights are not identifiable (hidden units permute: label switching), so the meaningful check is the "
            f"predictive R-hat of f(x) at the training inputs: {verdict}; the predictions' min bulk ESS "
            f"{_cell(row['ess_predictive_min'])} (100 per chain needed). "
            f"Try: {chain_advice(row['method'])}"
        )
    return lines


def _commit() -> str:
    try:
        result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() or "unknown"


def environment_lines() -> list[str]:
    """Versions, machine and commit, for the report's provenance section."""
    versions = ", ".join(f"{name} {version(name)}" for name in PACKAGES)
    return [
        f"- Python {platform.python_version()}; {versions}",
        f"- machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, {platform.system()}; "
        f"torch's CPU kernels {machine()['cpu_kernels']}",
        f"- commit: {_commit()}",
    ]


CALIBRATION_COLUMNS = {
    "regression": ("coverage_50", "width_50", "coverage_90", "width_90", "crps", "pit_calibration_error", "aurc"),
    "classification": ("test_ll", "brier", "ece", "mce", "ece_mass", "mce_mass", "entropy", "mutual_information", "aurc"),
}
"""The report's calibration table (:mod:`bnn.inference.evaluation.metrics`), regression and classification."""


def report_stages(posteriors: Mapping[str, Posterior], ood: ShiftSplit | None = None) -> int:
    """How many stages :func:`write_comparison` shows: a table row per fit, the ranking, the files, the plots (a
    trace per fit), the calibration plots, the out-of-distribution scores (with ``ood``) and ``report.md``."""
    return 2 * len(posteriors) + 6 + (ood is not None)


def calibration_sections(table: pd.DataFrame, dataset: Dataset, figures: dict[str, Path]) -> list[str]:
    """The report's calibration table with what its columns mean, and its figures."""
    kind = "regression" if dataset.task == "regression" else "classification"
    columns = [c for c in CALIBRATION_COLUMNS[kind] if c in table.columns]
    meaning = ("Coverage and mean width of the central 50% and 90% predictive intervals, the mean CRPS, the quantile "
               "calibration error of the PIT (0 for a calibrated predictive, 0.5 at worst), all in the target's units "
               "where they have one; `aurc` is the area under the RMSE-coverage curve when the points of highest "
               "predictive sd are dropped first (lower is better)." if kind == "regression" else
               "Log-likelihood and Brier score per test point, the expected and maximum calibration error over 10 "
               "equal-width and 10 equal-mass confidence bins, the mean predictive entropy and its epistemic part "
               "(the mutual information with the weights) in nats, and `aurc`, the area under the error-rate-coverage "
               "curve when the points of highest entropy are dropped first (lower is better).")
    return ["## Calibration and selective prediction", meaning, markdown_table(table[columns]),
            *[f"### {title}\n\n![{title}]({path.name})" for title, path in figures.items()]]


def ood_sections(table: pd.DataFrame, posteriors: Mapping[str, Posterior], split: ShiftSplit) -> list[str]:
    """The report's out-of-distribution section from :func:`~bnn.inference.evaluation.ood.ood_table`'s ``table``,
    with its verdict against the MAP network."""
    inside, shifted = table.attrs["inputs"]
    return [f"## Out-of-distribution detection: {split.name}",
            f"{inside} in-distribution and {shifted} shifted inputs (shift set `{split.name}`); each "
            "uncertainty is a detector of the shifted ones: AUROC (0.5 is chance), average precision, and the share of "
            "in-distribution inputs flagged at 95% of the shifted ones caught.",
            *map_baseline_lines(table, posteriors, split.dataset.task),
            markdown_table(table.set_axis([f"{fit}: {uncertainty}" for fit, uncertainty in table.index]))]


def set_coverage_section(table: pd.DataFrame, task: str, calibration_rows: int) -> list[str]:
    """The report's table of credible and conformal 90% sets (:mod:`bnn.inference.evaluation.set_coverage`)."""
    size = "width" if task == "regression" else "set_size"
    columns = ["credible_coverage", "conformal_coverage", f"credible_{size}", f"conformal_{size}"]
    what = "mean interval width in the target's units" if task == "regression" else "mean number of labels"
    return ["## Credible and conformal 90% sets",
            f"Each fit's own 90% {'central predictive interval' if task == 'regression' else 'credible set'} beside "
            f"its split-conformal one, calibrated on {calibration_rows} training rows held out of every fit: coverage "
            f"of the test split ({1 - SET_LEVEL_ALPHA:.0%} promised) and size ({what}). The conformal coverage holds "
            "on exchangeable data whatever the posterior got wrong; the credible one only where the posterior is "
            "calibrated.", markdown_table(table[columns])]


def write_comparison(posteriors: Mapping[str, Posterior], dataset: Dataset, out: str | Path, *, command: str,
                     overwrite: bool = False, progress: bool = True, cost_notes: Sequence[str] = (),
                     ood: ShiftSplit | None = None, calibration: tuple[torch.Tensor, torch.Tensor] | None = None,
                     reference: tuple[str, Posterior] | None = None) -> pd.DataFrame:
    """Write ``report.md``, ``comparison.csv``, ``ranking.csv``, PNGs and ``posterior-<fit>.nc`` into ``out``.

    Parameters
    ----------
    posteriors : mapping of label to Posterior
        The fits, labelled (see :func:`~bnn.inference.evaluation.compare.label_fits`); file names use :func:`slug` of the label.
    dataset : Dataset
        The data they were fitted on; its test split gives the metrics and picks the plots (1-D, regression,
        classification).
    out : str or Path
        The report folder, written atomically (complete or not at all).
    command : str
        The command that made the report, quoted in it.
    overwrite : bool
        Replace an existing ``out`` that holds a result of this package (:mod:`bnn.runtime.atomic`).
    progress : bool
        Show each stage as it starts (:func:`~bnn.runtime.progress.stages`).
    cost_notes : sequence of str
        What the fits were estimated to cost and what a time budget changed or left out
        (:mod:`bnn.experiments.comparison.time_budget`), for the report's section on cost.
    ood : ShiftSplit, optional
        A shift set of ``dataset`` (:func:`~bnn.inference.evaluation.shift_sets.shift_split`, whose ``dataset`` is
        the one given here): the report scores how well each fit's uncertainty detects it
        (:mod:`bnn.inference.evaluation.ood`), writes ``ood.csv`` and adds ``ood_auroc_total`` and
        ``ood_auroc_epistemic`` to the comparison table.
    calibration : (x, y), optional
        Training rows held out of every fit (:func:`~bnn.inference.evaluation.set_coverage.carve_calibration`): each
        fit's conformal 90% sets are calibrated on them and set beside its own
        (:func:`~bnn.inference.evaluation.set_coverage.set_coverage`), in a section and in the table's
        ``credible_*`` and ``conformal_*`` columns.
    reference : tuple of str and Posterior, optional
        A trusted posterior, with its label, of the same network and data (one of ``posteriors``, or a saved fit):
        each other fit's distance from its predictive at the test inputs
        (:func:`~bnn.inference.evaluation.fidelity.fidelity`), in a section and in the table's distance columns; a
        reference that fails its own check gets a warning in their place.

    Returns
    -------
    pandas.DataFrame
        The table of :func:`~bnn.inference.evaluation.compare.compare` (``comparison.csv``), with
        ``attrs["warnings"]``: the report's warnings (each fit's own, unreliable LOO, the ranking's verdict), one
        line each, for the command to print.

    Raises
    ------
    ValueError
        When ``out`` exists, is not empty and ``overwrite`` is false, or holds files this package did not write,
        or when ``ood`` is a shift set of another data set or ``calibration`` holds too few rows for 90% sets (before
        any work).
    """
    if calibration is not None:
        calibration_rank(len(calibration[0]), SET_LEVEL_ALPHA)
    if ood is not None and ood.dataset is not dataset:
        raise ValueError(f"shift set {ood.name!r} belongs to data set {ood.dataset.name!r}, not to the {dataset.name!r} "
                         "given: pass the split's dataset, the one the fits learnt from")
    with atomic_directory(out, writer="bnn compare", overwrite=overwrite) as staging, \
            stages(report_stages(posteriors, ood), desc="report", enabled=progress) as start:
        rows = {}
        for label, posterior in posteriors.items():
            start(f"metrics, LOO and WAIC of {label}")
            rows[label] = compare({label: posterior}, dataset).loc[label].to_dict()
            if calibration is not None:
                rows[label].update(set_coverage(posterior, dataset, calibration))
        if ood is not None:
            start(f"out-of-distribution scores ({ood.name})")
            detection = ood_table(posteriors, ood)
            detection.to_csv(staging / "ood.csv")
            for label in posteriors:
                rows[label].update(auroc_columns(detection, label, dataset.task))
        table = pd.DataFrame.from_dict(rows, orient="index")
        closeness = []
        if reference is not None:
            start(f"distances from the reference ({reference[0]})")
            distances, closeness = reference_distances(posteriors, reference[1], reference[0], dataset)
            if distances is not None:
                table = table.join(distances)
                closeness.append(markdown_table(distances))
        start("ranking (az.compare)")
        ranking = rank(posteriors)
        ranking = ranking.assign(loo_bad_k=table.loc[ranking.index, "loo_bad_k"], test_ll=table.loc[ranking.index, "test_ll"])
        start("tables and netCDF posteriors")
        table.to_csv(staging / "comparison.csv")
        ranking.to_csv(staging / "ranking.csv")
        for label, posterior in posteriors.items():
            posterior.to_netcdf(staging / f"posterior-{slug(label)}.nc")
        start("predictive plots")
        figures = {"Predictive distributions": plot_fit(posteriors, dataset, staging / "predictive.png")}
        if dataset.task == "regression" and dataset.in_features == 1:
            figures["All methods overlaid"] = plot_predictive_overlay(posteriors, dataset, staging / "overlay.png")
        if dataset.task == "regression":
            figures["Predictive sd against test error"] = plot_std_vs_error(posteriors, dataset, staging / "std_vs_error.png")
        start("calibration and selective-prediction plots")
        calibration_figures = {"Risk against coverage": plot_selective(posteriors, dataset, staging / "selective.png")}
        if dataset.task == "regression":
            calibration_figures["PIT histograms"] = plot_pit(posteriors, dataset, staging / "pit.png")
        shifted = ood_sections(detection, posteriors, ood) if ood is not None else []
        conformal = set_coverage_section(table, dataset.task, len(calibration[0])) if calibration is not None else []
        start("forest and marginal plots")
        figures["Weights across methods (forest)"] = plot_forest(posteriors, staging / "forest.png")
        figures["Marginals of a few weights against the prior"] = plot_marginals_vs_prior(posteriors, staging / "marginals.png")
        for label, posterior in posteriors.items():
            start(f"trace plot of {label}")
            figures[f"Trace: {label}"] = plot_trace(posterior, staging / f"trace-{slug(label)}.png")
        start("report.md")
        shown = [c for c in TABLE_COLUMNS if c in table.columns and not table[c].isna().all()]
        warnings = [*convergence_warnings(table), *fit_warnings(posteriors), *pareto_k_lines(table, len(dataset.x_train))]
        verdict = ranking_verdict(ranking, table) if len(ranking) else []
        scale = float(dataset.y_scaler.std.mean()) if dataset.task == "regression" else None
        draws = [p.num_chains * p.num_draws for p in posteriors.values() if p.num_chains * p.num_draws > 1]
        sections = [
            f"# {', '.join(posteriors)} on {dataset.name}",
            f"Command: `{command}`",
            f"Model: `{next(iter(posteriors.values())).model!r}`; {len(dataset.x_train)} training and "
            f"{len(dataset.x_test)} test examples. Metrics on the test split; LOO and WAIC on the training data.",
            *units_lines(scale),
            *(["## Cost", "\n".join(cost_notes)] if cost_notes else []),
            "## Comparison", *warnings, markdown_table(table[shown]),
            *calibration_sections(table, dataset, calibration_figures), *conformal, *shifted, *closeness,
            "## ArviZ ranking (az.compare, PSIS-LOO)", *verdict,
            markdown_table(ranking) if len(ranking) else NO_RANKING,
            *([warning_column_line(min(draws))] if draws else []),
            *[f"## {title}\n\n![{title}]({path.name})" for title, path in figures.items()],
            "## Environment", *environment_lines(),
        ]
        (staging / "report.md").write_text("\n\n".join(sections) + "\n")
    table.attrs["warnings"] = [*warnings, *verdict, *(line for line in closeness if line.startswith("**Warning"))]
    return table
