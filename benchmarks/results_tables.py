"""Every results file's tables, made again from the data committed beside it by the script that made them.

A Markdown file of ``benchmarks/results`` holds its tables between the line ``<!-- tables: ... -->`` and the line
``<!-- end of tables -->``: exactly what its entry of :data:`SOURCES` returns, the function of the benchmark script
(or of the library runner) that printed them, given the committed CSV or JSON files alone; nothing is fitted. A file
written whole by its script (``results.md`` beside its ``results.json``) starts with that script's ``markdown`` of the
JSON; a reading written by hand may follow it.

Usage::

    python -m benchmarks.results_tables [NAME ...]            # print the tables of these files (every file's)
    python -m benchmarks.results_tables [NAME ...] --check    # exit 1 naming the files whose tables differ
    python -m benchmarks.results_tables [NAME ...] --write    # write them into the files

A NAME is a file's path under ``benchmarks/results`` without ``.md`` (``uci``, ``swag_rate/results``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import NamedTuple

RESULTS = Path(__file__).parent / "results"
BEGIN, END = "<!-- tables:", "<!-- end of tables -->"


class Part(NamedTuple):
    """Tables made by ``module.function(*data)``, the data's paths relative to ``benchmarks/results``."""

    module: str
    function: str
    data: tuple[str, ...]


class Source(NamedTuple):
    """Where a file's tables come from: its parts, in order; ``whole``: the file starts with them (a ``results.md``
    written by its script from the ``results.json`` beside it, given the JSON's content), else they sit between the
    marker lines."""

    parts: tuple[Part, ...]
    whole: bool = False


def made_by(module: str, function: str, *data: str) -> Source:
    """A file whose tables ``module.function`` makes from ``data`` alone."""
    return Source((Part(module, function, data),))


def printed(*parts: tuple[str, str, str]) -> Source:
    """A file whose tables are parts ``(module, function, data)``, one data file each."""
    return Source(tuple(Part(module, function, (data,)) for module, function, data in parts))


def written(module: str, folder: str) -> Source:
    """A ``results.md`` that ``module``'s ``markdown`` wrote from the ``results.json`` beside it."""
    return Source((Part(module, "markdown", (f"{folder}/results.json",)),), whole=True)


CELLS = "benchmarks.provenance", "cell_tables"
"""Tables printed by a script not kept (a throwaway loop, a report): their cells as printed, in a CSV."""

SOURCES: dict[str, Source] = {
    "ard_relevance": made_by("benchmarks.ard_relevance", "tables_from_json",
                             *(f"ard_relevance/{name}.json" for name in ("kin8nm", "concrete", "bostonHousing", "yacht",
                                                                         "bostonHousing-laplace"))),
    "autonormal_init": made_by("benchmarks.autonormal_init", "tables_from_json", "autonormal_init/ard/results.json",
                               "autonormal_init/others/results.json"),
    **{f"{folder}/results": written("benchmarks.autonormal_init", folder)
       for folder in ("autonormal_init/ard", "autonormal_init/others")},
    "cnn": printed(("benchmarks.cnn", "tables_from_csv", "cnn/fits.csv"), (*CELLS, "cnn/ad_hoc.csv"),
                   (*CELLS, "cnn/decrement.csv"), (*CELLS, "cnn/whitening.csv"), (*CELLS, "cnn/laplace_ten_classes.csv")),
    "continual": printed((*CELLS, "continual/scores.csv"), (*CELLS, "continual/variants.csv")),
    "demo": printed((*CELLS, "demo/main_job.csv"), (*CELLS, "demo/calibration.csv"), (*CELLS, "demo/wall_time.csv"),
                    (*CELLS, "demo/memory.csv"),
                    ("benchmarks.provenance", "comparison_tables", "baselines/toy1d/comparison.csv"),
                    ("benchmarks.provenance", "comparison_tables", "baselines/yacht/comparison.csv")),
    "fidelity": made_by("benchmarks.fidelity", "tables_from_csv", "fidelity/results.csv"),
    "estimates": printed(("benchmarks.estimates", "tables_from_csv", "estimates/fits.csv"),
                         *((*CELLS, f"estimates/{name}.csv") for name in ("units", "time_budget", "main_job", "report",
                                                                          "report_stage"))),
    "grid_verdicts": Source((Part(*CELLS, ("grid_verdicts/svi_check.csv",)),
                             Part("benchmarks.grid_verdicts", "tables_from_csv",
                                  ("uci/results.csv", "uci/sgmcmc_old_defaults.csv", "uci/protein_full_batch_map.csv",
                                   "uci/grid_after.csv",
                                   "uci/sgmcmc_map_starts.csv", "uci/grid_broken.csv")),
                             Part(*CELLS, ("grid_verdicts/yacht_sgld.csv",)))),
    "laplace_uci": made_by("benchmarks.laplace_uci", "tables_from_json", "laplace_uci/before.json",
                           "laplace_uci/after_small.json", "laplace_uci/untuned.json", "laplace_uci/evidence_search.json"),
    "map_check": printed(("benchmarks.map_check", "tables_from_csv", "map_check/results.csv"),
                         ("benchmarks.mc_dropout_check", "tables_from_csv", "map_check/mc_dropout.csv")),
    "map_verdicts": printed((*CELLS, "map_verdicts/cells.csv"), (*CELLS, "map_verdicts/summary.csv"),
                            (*CELLS, "map_verdicts/svi_elbo.csv")),
    **{f"{folder}/results": written("benchmarks.mc_dropout_replica", folder)
       for folder in ("mc_dropout_replica/yacht", "mc_dropout_replica/yacht-4000", "mc_dropout_replica/concrete")},
    "nuts_defaults": printed(("benchmarks.nuts_defaults", "tables_from_csv", "nuts_defaults/ten_seeds.csv"),
                             (*CELLS, "nuts_defaults/summary.csv"),
                             ("benchmarks.main_job_checks", "tables_from_csv", "nuts_defaults/main_job_checks.csv"),
                             (*CELLS, "nuts_defaults/yacht.csv"),
                             (*CELLS, "nuts_defaults/boston.csv")),
    "nuts_speed": printed(("benchmarks.nuts_speed", "tables_from_csv", "nuts_speed/medians.csv"),
                          (*CELLS, "nuts_speed/others.csv")),
    "scorecard": printed(("benchmarks.scorecard", "tables_from_csv", "scorecard/scores.csv"),
                         (*CELLS, "scorecard/tempered_mode.csv")),
    **{f"{folder}/results": written("benchmarks.sgmcmc_steps", folder)
       for folder in ("sgmcmc_steps", "sgmcmc_steps/psgld", "sgmcmc_steps/sgld_shares", "sgmcmc_steps/csgld_share3")},
    "svi_defaults": Source((Part("benchmarks.svi_defaults", "tables_from_csv",
                                 ("svi_defaults/settings.csv", "svi_defaults/reference.csv")),
                            Part(*CELLS, ("svi_defaults/yacht.csv",)))),
    "svi_jit": made_by("benchmarks.svi_jit", "tables_from_csv", "svi_jit/times.csv"),
    "svi_speed": made_by("benchmarks.svi_speed", "tables_from_csv", "svi_speed/step_times.csv"),
    "swag_rate/results": written("benchmarks.swag_rate", "swag_rate"),
    "swag_rate/width/results": written("benchmarks.swag_rate", "swag_rate/width"),
    "test_suite": printed((*CELLS, "test_suite/tables.csv")),
    "training_cost": made_by("benchmarks.training_cost", "tables_from_csv", "training_cost/results.csv"),
    "threads": printed(("benchmarks.thread_contention", "tables_from_csv", "threads/contention.csv"),
                       (*CELLS, "threads/main_jobs.csv"), (*CELLS, "threads/mnist1d_cnn.csv")),
    "uci": Source((Part("benchmarks.uci_tables", "headline_tables", ("uci/results.csv",)),
                   Part("benchmarks.uci_tables", "cost_table", ("uci/results.csv",)),
                   Part("benchmarks.uci_tables", "side_tables",
                        ("uci/swag_batch32.csv", "uci/sgmcmc_old_defaults.csv", "uci/conformal_yacht.csv")))),
    "uci/table": made_by("benchmarks.uci_tables", "every_table", "uci/results.csv"),
    "uci_smoke": made_by("benchmarks.uci_tables", "smoke_tables", "uci_smoke/results.csv"),
}
"""Every results file whose tables are made from committed data, by name (its path without ``.md``)."""


def begin(name: str) -> str:
    """The line before a file's tables: where they come from and how to write them again."""
    paths = dict.fromkeys(path for part in SOURCES[name].parts for path in part.data)
    data = ", ".join(f"benchmarks/results/{path}" for path in paths)
    return f"{BEGIN} made from {data} by python -m benchmarks.results_tables {name} --write -->"


def tables(name: str) -> str:
    """The tables of results file ``name``, from its committed data alone."""
    source, made = SOURCES[name], []
    for part in source.parts:
        function = getattr(importlib.import_module(part.module), part.function)
        if source.whole:
            made.append(function(*(json.loads((RESULTS / path).read_text()) for path in part.data)))
        else:
            made.append(function(*(RESULTS / path for path in part.data)))
    return "\n".join(made)


def expected(name: str, text: str) -> str:
    """``text`` (the file ``name`` as it stands) with its tables made again."""
    made = tables(name)
    if SOURCES[name].whole:
        ours = current(name, text)
        return made + text[len(ours):]
    start, end = _span(name, text)
    return text[:start] + f"{begin(name)}\n\n{made}\n{END}" + text[end:]


def current(name: str, text: str) -> str:
    """The tables ``text`` holds now: between the markers, or (a file written whole) the text up to a heading
    ``## Reading`` (the whole text without one)."""
    if SOURCES[name].whole:
        cut = text.find("\n## Reading\n")
        return text if cut < 0 else text[:cut]
    start, end = _span(name, text)
    return text[start:end]


def _span(name: str, text: str) -> tuple[int, int]:
    """Where the tables of ``text`` start (the marker line ``<!-- tables: ...``, whatever data it names) and end."""
    start = text.find(BEGIN)
    end = text.find(END, start)
    if start < 0 or end < 0:
        raise ValueError(f"benchmarks/results/{name}.md has no '{BEGIN} ... -->' ... '{END}' lines")
    return start, end + len(END)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.results_tables", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="files under benchmarks/results, without .md (default: every one)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="exit 1 where a file's tables differ from its data's")
    action.add_argument("--write", action="store_true", help="write the tables into the files")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SOURCES))
    if unknown:
        parser.error(f"no such results file with data: {unknown}; choose from {sorted(SOURCES)}")
    differing = []
    for name in args.names or list(SOURCES):
        path = RESULTS / f"{name}.md"
        if not (args.check or args.write):
            print(tables(name))
            continue
        text = path.read_text()
        made = expected(name, text)
        if made != text:
            differing.append(name)
            if args.write:
                path.write_text(made)
    if args.check and differing:
        print("tables differ from their data: " + ", ".join(differing), file=sys.stderr)
        raise SystemExit(1)
    return differing


if __name__ == "__main__":
    main()
