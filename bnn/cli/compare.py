"""``bnn compare``: several methods on one model and data set, and the report that compares them.

Each finished fit is kept on disk at once and a rerun of the same command reuses it; ``--out`` appears complete or
not at all."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bnn.cli.arguments import (
    add_fit_arguments,
    add_model_arguments,
    build_model,
    command_line,
    duration_argument,
    fit_options,
    uci_split,
)
from bnn.datasets import load_dataset
from bnn.experiments.comparison.finished_fits import FinishedFits, run_fingerprint
from bnn.experiments.comparison.report import write_comparison
from bnn.experiments.comparison.time_budget import choose_fits, cost_lines
from bnn.guides import GUIDES
from bnn.inference.evaluation.compare import label_fits
from bnn.inference.evaluation.conformal import calibration_rank
from bnn.inference.evaluation.cost import format_seconds
from bnn.inference.evaluation.set_coverage import SET_LEVEL_ALPHA, carve_calibration_with_shift
from bnn.inference.evaluation.shift_sets import SHIFT_SETS, shift_split
from bnn.inference.fit import METHODS, fit
from bnn.runtime.atomic import (
    check_apart,
    check_replaceable,
    check_writable,
)
from bnn.runtime.stop_signals import sigterm_as_keyboard_interrupt


def method_specs(text: str) -> list[tuple[str, str | None]]:
    """Parse ``svi,svi:meanfield,nuts`` into ``[("svi", None), ("svi", "meanfield"), ("nuts", None)]``."""
    specs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        method, _, guide = part.partition(":")
        METHODS.get(method)
        if guide:
            GUIDES.get(guide)
        specs.append((method, guide or None))
    if not specs:
        raise ValueError("--methods needs at least one method, for example svi,nuts,laplace")
    return specs


def options_per_method(specs: list[tuple[str, str | None]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Give each method the options it takes, over compare's own defaults for it
    (:attr:`~bnn.inference.core.method.Method.compare_options`); refuse an option that no chosen method takes."""
    accepted = [set(METHODS.get(method).options.names()) for method, _ in specs]
    unused = sorted(set(options) - set().union(*accepted))
    if unused:
        raise ValueError(f"option(s) {unused} apply to none of the methods {[m for m, _ in specs]}")
    routed = []
    for (method, guide), names in zip(specs, accepted):
        chosen = {**METHODS.get(method).compare_options, **{k: v for k, v in options.items() if k in names}}
        if guide is not None:
            if "guide" not in names:
                raise ValueError(f"method {method!r} takes no guide; write {method} instead of {method}:{guide}")
            chosen["guide"] = guide
        routed.append(chosen)
    return routed


def fit_or_reuse(model, dataset, specs, routed, kept: FinishedFits, command: str) -> list:
    """Each fit of ``compare``: reused from ``kept`` when an earlier run of the same ``command`` finished it, else run
    and kept there as soon as it finishes. Ctrl-C or SIGTERM (a Markov-chain, MC dropout or ensemble fit returns
    ``incomplete``) ends the loop with ``KeyboardInterrupt`` naming what was kept and how to go on."""
    fits = []
    try:
        for index, ((method, _), options) in enumerate(zip(specs, routed)):
            posterior = kept.load(index, method)
            if posterior is not None:
                print(f"reusing the finished {method} fit of an earlier run of this command: {kept.path(index, method)}")
            else:
                posterior = fit(model, dataset, method, **options)
                if posterior.record.interrupted is not None:
                    raise KeyboardInterrupt(f"{method}: {posterior.record.interrupted}")
                kept.save(index, method, posterior)
            fits.append(posterior)
    except KeyboardInterrupt as error:
        raise KeyboardInterrupt(compare_interrupted(str(error) or "SIGINT", kept, command)) from None
    return fits


def compare_interrupted(reason: str, kept: FinishedFits, command: str) -> str:
    """What an interrupted ``compare`` says: why, which finished fits are on disk, and the command that reuses them."""
    saved = [path.name for path in kept.saved()]
    if not saved:
        return f"compare stopped ({reason}) before any fit finished; nothing was kept"
    return (f"compare stopped ({reason}); the finished fits {', '.join(saved)} are kept in {kept.folder}: run the same "
            f"command again to reuse them: {command}")


def run_compare(args: argparse.Namespace) -> pd.DataFrame:
    """Fit every method on the same model and data, then write the comparison report into ``--out``.

    Each finished fit is kept on disk at once (:class:`~bnn.experiments.comparison.finished_fits.FinishedFits`) and a
    rerun of the same command reuses it; ``--out`` appears complete or not at all. Before any fit, each method's cost
    is estimated and printed, and ``--time-budget`` lowers draws and steps or leaves methods out
    (:mod:`bnn.experiments.comparison.time_budget`); a rerun under a budget may choose other draws, and then refits.
    """
    check_apart(args.out, {"--uci-dir": args.uci_dir})  # all found before minutes of fitting
    check_replaceable(args.out, overwrite=args.overwrite)
    check_writable(args.out)
    with sigterm_as_keyboard_interrupt():  # SIGTERM ends the command as Ctrl-C does: status 130, saying what was kept
        loaded = load_dataset(args.dataset, uci_dir=args.uci_dir, split=uci_split(args), seed=args.seed)
        shift = shift_split(loaded, args.ood) if args.ood is not None else None  # refused before minutes of fitting
        dataset = shift.dataset if shift is not None else loaded  # held-out-classes trains without some classes
        calibration = None
        if args.conformal is not None:  # carved before any fit, with enough rows for 90% sets
            dataset, calibration, shift = carve_calibration_with_shift(loaded, shift, args.conformal, args.seed)
            calibration_rank(len(calibration[0]), SET_LEVEL_ALPHA)
        model = build_model(args, dataset)
        specs = method_specs(args.methods)
        routed = options_per_method(specs, fit_options(args))
        run = choose_fits(model, dataset, [method for method, _ in specs], routed, args.time_budget)
        choices = run.fits
        cost_notes = cost_lines(run, args.time_budget)
        print("\n".join(cost_notes))
        if all(choice.skipped for choice in choices):
            raise ValueError(f"no method fits in --time-budget {format_seconds(args.time_budget)}: raise it, or ask for "
                             "fewer draws or steps (see the estimates above)")
        specs = [spec for spec, choice in zip(specs, choices) if not choice.skipped]
        routed = [choice.options for choice in choices if not choice.skipped]
        methods = [method for method, _ in specs]
        kept = FinishedFits(args.out, run_fingerprint(model, dataset, list(zip(methods, routed))))
        posteriors = label_fits(fit_or_reuse(model, dataset, specs, routed, kept, command_line(args)))
        try:
            began = time.perf_counter()
            table = write_comparison(posteriors, dataset, args.out, command=command_line(args), overwrite=args.overwrite,
                                     progress=not args.quiet, cost_notes=cost_notes, ood=shift,
                                     calibration=calibration)
            report_seconds = time.perf_counter() - began
        except KeyboardInterrupt as error:
            reason = f"{str(error) or 'SIGINT'} while writing the report"
            raise KeyboardInterrupt(compare_interrupted(reason, kept, command_line(args))) from None
    kept.discard()
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table.T.to_string())
    print("\n".join(line.replace("**", "") for line in table.attrs["warnings"]))
    print(f"report: {Path(args.out) / 'report.md'} (written in {format_seconds(report_seconds)}; estimated "
          f"{format_seconds(run.report.seconds)})")
    return table


def add_compare_parser(commands) -> None:
    """Add the subcommand ``compare`` to ``bnn``'s subparsers ``commands``."""
    parser = commands.add_parser(
        "compare", help="fit several methods on one model, write a comparison report",
        epilog="compare's own defaults, below any option given: "
        + "; ".join(f"{name}: {dict(METHODS.get(name).compare_options)}" for name in METHODS.names()
                    if METHODS.get(name).compare_options))
    add_model_arguments(parser)
    add_fit_arguments(parser)
    parser.add_argument("--methods", default="svi,nuts,laplace",
                        help="comma-separated methods, optionally with a guide: svi:meanfield (default svi,nuts,laplace)")
    parser.add_argument("--out", type=Path, default=Path("results/compare"), help="report folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument("--time-budget", type=duration_argument, metavar="DURATION",
                        help="for example 90s, 10m, 1h30m: lower draws and steps, or leave a method out, to fit "
                        "within it by each method's cost, estimated (and printed) before any fit")
    parser.add_argument("--ood", choices=SHIFT_SETS.names(), metavar="SHIFT",
                        help=f"score how well each fit's uncertainty detects a shift set ({', '.join(SHIFT_SETS.names())}: "
                        "gap for toy1d, farthest for any data set, held-out-classes for a multiclass one, noise and "
                        "rotation for images), in the report and ood.csv; held-out-classes fits without those classes")
    parser.add_argument("--conformal", type=float, metavar="SHARE",
                        help="hold this share of the training rows out of every fit (seeded by --seed; 0.2 is usual) "
                        "and calibrate each fit's conformal 90%% sets on them, reported beside its own 90%% sets")
    parser.set_defaults(run=run_compare)
