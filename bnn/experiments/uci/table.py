r"""A UCI run's results as ``results.csv`` (one row per cell) and ``table.md`` (ours beside the published numbers).

Per data set and method, over the :math:`n` splits that finished, the mean and its standard error

.. math::

    \bar m = \frac{1}{n}\sum_k m_k, \qquad \mathrm{s.e.} = \sqrt{\frac{1}{n(n - 1)}\sum_k (m_k - \bar m)^2},

for the test RMSE and the test log-likelihood (no s.e. for one split). A cell of ours is bold where, over two splits
or more, it beats every published number of its row by more than its own standard error: a lower RMSE, a higher
log-likelihood (one split has no standard error, so it is never bold). A mean and its s.e. show three decimals, or
as many as give the mean two significant digits where three would give it fewer (naval's RMSE of 0.0011 is not
0.001).
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from bnn.experiments.uci.protocol import AGREEMENT_COLUMNS, CALIBRATION_COLUMNS, COLUMNS, CONFORMAL_COLUMNS
from bnn.experiments.uci.published import MC_DROPOUT, PUBLISHED, REPRODUCED
from bnn.inference.core.chain_record import ChainRecord
from bnn.inference.core.method import METHODS
from bnn.inference.core.record import FitRecord
from bnn.runtime.atomic import atomic_file

RESULTS_FILE, TABLE_FILE = "results.csv", "table.md"
METRICS = {"rmse": ("Test RMSE (original units; lower is better)", 0, -1.0),
           "test_ll": ("Test log-likelihood (mean per test point, original units; higher is better)", 2, 1.0)}
"""Each metric: its heading, its index in a published entry, and the sign that makes larger better."""


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Per data set and method: the finished splits ``n``, failed cells, converged cells, and each metric's mean and
    standard error over the finished splits (module notes)."""
    rows = []
    optional = (*CALIBRATION_COLUMNS, *CONFORMAL_COLUMNS, *AGREEMENT_COLUMNS)
    missing = {column: math.nan for column in optional if column not in results}  # cells from before them
    for (dataset, method), cells in results.assign(**missing).groupby(["dataset", "method"], sort=False):
        ok = cells[cells["status"] == "ok"]
        row: dict[str, Any] = {"dataset": dataset, "method": method, "n": len(ok), "failed": int((cells["status"] != "ok").sum()),
                               "converged": int((ok["verdict"] == "converged").sum()), "selection": cells["selection"].iloc[0],
                               "measured": int(ok["crps"].notna().sum()),
                               "conformal_measured": int(ok["conformal_coverage"].notna().sum()),
                               "agreement_measured": int(ok[AGREEMENT_COLUMNS[0]].notna().sum())}
        for metric in (*METRICS, *optional):
            values = ok[metric].astype(float).dropna()  # a cell written before calibration was measured has none
            row[metric] = values.mean() if len(values) else math.nan
            row[f"{metric}_se"] = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def decimals(value: float) -> int:
    """The decimals that show ``value`` (a mean) with at least two significant digits, three at the least: 3 for
    ``0.077`` or ``2.84``, 4 for ``0.0011``, 5 for ``0.00042``; 3 for zero."""
    if value == 0 or not math.isfinite(value) or abs(value) >= 0.0095:
        return 3
    return 1 - math.floor(math.log10(abs(value)))


def mean_and_error(mean: float, se: float) -> str:
    """``mean ± se`` (``mean`` alone where ``se`` is NaN), both with the :func:`decimals` of the mean."""
    places = decimals(mean)
    return f"{mean:.{places}f}" + ("" if math.isnan(se) else f" ± {se:.{places}f}")


def beats(mean: float, se: float, n: int, best_published: float | None, sign: float) -> bool:
    """Whether ours beats ``best_published`` (``sign``: +1 where larger is better) by more than its standard error, over
    two splits or more (one split has no standard error to weigh the difference against)."""
    if best_published is None or n < 2 or math.isnan(se):
        return False
    return sign * (mean - best_published) > se


def _ours(mean: float, se: float, n: int, best_published: float | None, sign: float) -> str:
    if n == 0:
        return "failed"
    text = f"{mean_and_error(mean, se)} ({n})"
    return f"**{text}**" if beats(mean, se, n, best_published, sign) else text


def metric_table(table: pd.DataFrame, metric: str) -> list[str]:
    """The markdown lines of one metric: a row per data set, a column per method of ours, then the published ones."""
    heading, index, sign = METRICS[metric]
    methods = list(dict.fromkeys(table["method"]))
    lines = [f"## {heading}", "", "| data set | " + " | ".join(methods + [p.label for p in PUBLISHED]) + " |",
             "|---|" + "---|" * (len(methods) + len(PUBLISHED))]
    for dataset, rows in table.groupby("dataset", sort=False):
        published = [p.results.get(dataset) for p in PUBLISHED]
        known = [sign * entry[index] for entry in published if entry is not None]
        best = sign * max(known) if known else None
        ours = {row.method: _ours(getattr(row, metric), getattr(row, f"{metric}_se"), row.n, best, sign)
                for row in rows.itertuples()}
        theirs = ["" if entry is None else f"{entry[index]:.2f} ± {entry[index + 1]:.2f}" for entry in published]
        lines.append(f"| {dataset} | " + " | ".join([ours.get(m, "") for m in methods] + theirs) + " |")
    return lines + [""]


def calibration_table(table: pd.DataFrame) -> list[str]:
    """The markdown lines of the cells' calibration (ours alone: the papers report neither): per data set and method
    the mean CRPS and PIT calibration error over the finished splits that measured them."""
    lines = ["## Calibration (mean CRPS in the target's units, then the PIT's quantile calibration error; lower is better)",
             "", "| data set | method | CRPS | PIT calibration error |", "|---|---|---|---|"]
    for row in table.itertuples():
        cells = [_ours(getattr(row, c), getattr(row, f"{c}_se"), row.measured, None, -1.0) if row.measured else "not measured"
                 for c in CALIBRATION_COLUMNS]
        lines.append(f"| {row.dataset} | {row.method} | " + " | ".join(cells) + " |")
    return lines + [""]


def conformal_table(table: pd.DataFrame) -> list[str]:
    """The markdown lines of the cells' 90% conformal intervals (``bnn uci --conformal``): per data set and method the
    mean test coverage and width over the finished splits that measured them; none when no cell did."""
    if not table["conformal_measured"].any():
        return []
    lines = ["## Conformal 90% intervals (test coverage, then mean width in the target's units; a second fit on the "
             "training rows the calibration share leaves)", "", "| data set | method | coverage | width |", "|---|---|---|---|"]
    for row in table.itertuples():
        cells = [_ours(getattr(row, c), getattr(row, f"{c}_se"), row.conformal_measured, None, -1.0)
                 if row.conformal_measured else "not measured" for c in CONFORMAL_COLUMNS]
        lines.append(f"| {row.dataset} | {row.method} | " + " | ".join(cells) + " |")
    return lines + [""]


def agreement_table(table: pd.DataFrame) -> list[str]:
    """The markdown lines of the chains' agreement at the test inputs (methods with two or more chains): per data set
    and method, over the finished splits that measured it, the mean of each cell's largest predictive R-hat and of
    the shares of its test inputs within 1.1 and 1.01, then per method how this agreement and its verdict
    ``converged`` relate (:func:`agreement_and_verdict`); none when no cell measured it."""
    if not table["agreement_measured"].any():
        return []
    lines = ["## The chains' agreement at the test inputs (predictive R-hat per test input: the largest, then the share "
             "of test inputs within 1.1 and within 1.01; means over the splits)", "",
             "| data set | method | largest R-hat | share within 1.1 | share within 1.01 |", "|---|---|---|---|---|"]
    measured = table[table["agreement_measured"] > 0]
    for row in measured.itertuples():
        cells = [_ours(getattr(row, c), getattr(row, f"{c}_se"), row.agreement_measured, None, -1.0) for c in AGREEMENT_COLUMNS]
        lines.append(f"| {row.dataset} | {row.method} | " + " | ".join(cells) + " |")
    lines += ["", "How this agreement and each method's verdict (converged, in the methods table) relate:", ""]
    return lines + [f"- {method}: {agreement_and_verdict(method)}" for method in dict.fromkeys(measured["method"])] + [""]


VERDICT_WORDS = {"True": "converged", "False": "not converged", "None": "no check"}
"""A record's ``converged`` as a cell's verdict says it (:func:`~bnn.experiments.uci.protocol.verdict`)."""


def _record(method: str) -> type[FitRecord] | None:
    return METHODS.get(method).record if method in METHODS else None


def verdict_check(method: str) -> str:
    """What the verdict ``converged`` of ``method``'s cells checks, in a few words: for a method of Markov chains
    (its record a :class:`~bnn.inference.core.chain_record.ChainRecord`) the chains' agreement, else the first
    sentence of its record's ``converged`` as plain text."""
    record = _record(method)
    if record is None:
        return "not known (a method this version does not have)"
    if issubclass(record, ChainRecord):
        return ("its chains agree at the training inputs (predictive R-hat at most 1.01), none failed, no divergence, "
                "and enough effective draws")
    if record.converged is FitRecord.converged:
        return "nothing: the method has no check of its own (its cells say no check)"
    text = re.sub(r"\s*\(:\w+:`[^`]+`\)", "", inspect.getdoc(record.converged) or "")  # a reference alone in brackets
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`", r"\1", text)
    for value, word in VERDICT_WORDS.items():
        text = text.replace(f"``{value}``", word)
    first = " ".join(text.replace("``", "").split()).split(". ")[0].rstrip(".")
    return first[len("Whether "):] if first.startswith("Whether ") else first


def agreement_and_verdict(method: str) -> str:
    """Why a cell of ``method`` may be ``converged`` beside a high R-hat in the agreement table, or not."""
    record = _record(method)
    if record is not None and issubclass(record, ChainRecord):
        return ("its verdict reads the same R-hat, at the training inputs: a high R-hat here goes with not converged, "
                "and the test metrics average over chains that disagree")
    return (f"its verdict checks that {verdict_check(method)}, not this agreement: the groups of draws compared here "
            "(its members, each fitted from a start of its own) are not Markov chains meant to meet, so converged "
            "beside a high R-hat is no contradiction; a high R-hat says they predict differently at the test inputs, "
            "and the test metrics average over them")


def reproductions(table: pd.DataFrame) -> list[str]:
    r"""The markdown lines of each method that follows a published method's protocol
    (:attr:`~bnn.inference.core.uci_protocol.UCIProtocol.reproduces`) against that method's published test
    log-likelihoods (:data:`~bnn.experiments.uci.published.REPRODUCED`): per data set, the difference of the means in
    standard errors of the difference, :math:`(\bar m - m_{\text{pub}}) / \sqrt{\text{s.e.}^2 +
    \text{s.e.}_{\text{pub}}^2}` (:meth:`~bnn.experiments.uci.published.PublishedMethod.standard_error`); none without
    such rows."""
    lines = []
    for method in table["method"].unique():
        reproduced = METHODS.get(method).uci.reproduces if method in METHODS else None
        ours = table[(table["method"] == method) & (table["n"] > 1)]
        if reproduced is None or ours.empty:
            continue
        columns = REPRODUCED[reproduced]
        lines += [f"## {reproduced} against its published test log-likelihood (difference in standard errors of the "
                  "difference; within one: |d| <= 1)", "",
                  "| data set | ours | " + " | ".join(f"{p.label} | d" for p in columns) + " |",
                  "|---|---|" + "---|---|" * len(columns)]
        for row in ours.itertuples():
            cells = []
            for published in columns:
                if row.dataset not in published.results:
                    cells += ["", ""]
                    continue
                mean, se = published.results[row.dataset][2], published.standard_error(row.dataset, 2)
                cells += [f"{mean:.2f} ± {se:.3f}", f"{(row.test_ll - mean) / math.hypot(row.test_ll_se, se):+.1f}"]
            lines.append(f"| {row.dataset} | {mean_and_error(row.test_ll, row.test_ll_se)} ({row.n}) | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return lines


def beats_dropout(table: pd.DataFrame) -> list[str]:
    """One line per method of ours: on which data sets its mean test log-likelihood beats MC dropout's published one."""
    lines = []
    for method, rows in table.groupby("method", sort=False):
        rated = rows[rows["dataset"].isin(list(MC_DROPOUT.results)) & (rows["n"] > 0)]
        wins = [row.dataset for row in rated.itertuples() if row.test_ll > MC_DROPOUT.results[row.dataset][2]]
        lines.append(f"- {method}: {len(wins)} of {len(rated)} data sets" + (f" ({', '.join(wins)})" if wins else ""))
    return lines


def markdown(results: pd.DataFrame, command: str | None = None) -> str:
    """``table.md``: the two metric tables, the comparison with MC dropout, how each method chose its
    hyper-parameters with its cells' verdicts and what each verdict checks, and every failed cell with its reason."""
    table = summary(results)
    lines = ["# UCI regression benchmark", ""] + ([f"`{command}`", ""] if command else []) + [
        "Ours: mean ± standard error over the splits that finished (their number in brackets); published: as printed "
        "(cited in `bnn.experiments.uci.published`; the papers' ± is the standard deviation over the splits, the "
        "repository's the standard error). **Bold**: over two splits or more, ours beats every published number of the "
        "row by more than its standard error.",
        ""]
    lines += metric_table(table, "rmse") + metric_table(table, "test_ll") + calibration_table(table) + conformal_table(table)
    lines += agreement_table(table) + reproductions(table)
    lines += [f"Mean test log-likelihood above {MC_DROPOUT.label}'s published one:", ""] + beats_dropout(table) + [""]
    lines += ["## Methods", "", "| data set | method | hyper-parameters chosen by | splits finished | failed | converged |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {row.dataset} | {row.method} | {row.selection} | {row.n} | {row.failed} | {row.converged} of {row.n} |"
              for row in table.itertuples()]
    lines += ["", "What converged checks (each method's own check of its fit; a cell that is not converged still counts "
              "in the tables above):", ""]
    lines += [f"- {method}: {verdict_check(method)}" for method in dict.fromkeys(table["method"])]
    failed = results[results["status"] != "ok"]
    if len(failed):
        lines += ["", "## Failed cells (a rerun of the same command runs them again)", ""]
        lines += [f"- {row.dataset} / {row.method} / split {row.split}, after {row.attempts} attempt(s): {row.problems}"
                  for row in failed.itertuples()]
    return "\n".join(lines) + "\n"


def write_tables(results: list[dict[str, Any]], out: Path, command: str | None = None) -> pd.DataFrame:
    """Write ``results.csv`` and ``table.md`` of ``results`` (one dict per cell) into ``out``; return the rows."""
    columns = list(COLUMNS) + list(CALIBRATION_COLUMNS) + list(CONFORMAL_COLUMNS) + list(AGREEMENT_COLUMNS)
    frame = pd.DataFrame(results, columns=columns).sort_values(["dataset", "method", "split"], kind="stable")
    with atomic_file(out / RESULTS_FILE) as handle:
        frame.to_csv(handle, index=False)
    with atomic_file(out / TABLE_FILE) as handle:
        handle.write(markdown(frame, command))
    return frame
