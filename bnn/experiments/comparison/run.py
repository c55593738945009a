"""``run_comparison``: several methods fitted on one model and data set, and the report that compares them.

The whole of ``bnn compare`` as a function; the command line only parses its arguments and calls it. In order:

1. every check that can be made before a fit: the methods and guides by name, each method's options (parsed once,
   over ``compare``'s own defaults for it), whether each method can fit the network (a hierarchical prior Laplace
   cannot fit is refused here, not after the fits before it), the output folder, the shift set and the conformal
   share;
2. each fit's cost, estimated and printed; under ``time_budget`` draws and steps lowered or methods left out
   (:mod:`bnn.experiments.comparison.time_budget`);
3. the fits, each kept on disk as it finishes (:class:`~bnn.experiments.comparison.finished_fits.FinishedFits`), and
   reused by a rerun of the same comparison (same model, data, options, seed); Ctrl-C or SIGTERM stops with what was
   kept and the command that reuses it;
4. the report, written atomically into ``out`` (:func:`~bnn.experiments.comparison.report.write_comparison`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from bnn.datasets.dataset import Dataset
from bnn.experiments.comparison.finished_fits import FinishedFits, run_fingerprint
from bnn.experiments.comparison.reference import saved_reference
from bnn.experiments.comparison.report import write_comparison
from bnn.experiments.comparison.time_budget import choose_fits, cost_lines, parse_duration
from bnn.guides import GUIDES
from bnn.inference.core.point_parameters import needs_point_fit
from bnn.inference.evaluation.compare import label_fits
from bnn.inference.evaluation.conformal import calibration_rank
from bnn.inference.evaluation.cost import format_seconds
from bnn.inference.evaluation.set_coverage import SET_LEVEL_ALPHA, carve_calibration_with_shift
from bnn.inference.evaluation.shift_sets import shift_split
from bnn.inference.fit import METHODS, fit
from bnn.models.network import BayesianNetwork
from bnn.runtime.atomic import check_replaceable, check_writable, writing
from bnn.runtime.stop_signals import sigterm_as_keyboard_interrupt

DEFAULT_METHODS = "svi,nuts,laplace"
"""The methods of a comparison when none are named: the three the collection is built around."""


class MethodSpec(NamedTuple):
    """One fit of a comparison: a method, and for a method that takes one, its guide (``None``: its default)."""

    method: str
    guide: str | None = None


def method_specs(methods: str | Sequence[str | MethodSpec]) -> list[MethodSpec]:
    """The fits ``methods`` names: ``"svi,svi:meanfield,nuts"`` or a list of such names (``ValueError`` for an unknown
    method or guide, or none at all)."""
    names = methods.split(",") if isinstance(methods, str) else list(methods)
    specs = []
    for part in names:
        if isinstance(part, MethodSpec):
            specs.append(part)
            continue
        if not isinstance(part, str):
            raise ValueError(f"methods must be names such as 'svi' or 'svi:meanfield', got {part!r}")
        if not part.strip():
            continue
        method, _, guide = part.strip().partition(":")
        METHODS.get(method)
        if guide:
            GUIDES.get(guide)
        specs.append(MethodSpec(method, guide or None))
    if not specs:
        raise ValueError(f"a comparison needs at least one method, for example {DEFAULT_METHODS}")
    return specs


def options_per_method(specs: Sequence[MethodSpec], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Give each fit the options its method takes, over ``compare``'s own defaults for it
    (:attr:`~bnn.inference.core.method.Method.compare_options`); refuse an option that no chosen method takes, and a
    guide given to a method that takes none."""
    accepted = [set(METHODS.get(spec.method).options.names()) for spec in specs]
    unused = sorted(set(options) - set().union(*accepted))
    if unused:
        raise ValueError(f"option(s) {unused} apply to none of the methods {[spec.method for spec in specs]}")
    routed = []
    for spec, names in zip(specs, accepted):
        chosen = {**METHODS.get(spec.method).compare_options, **{k: v for k, v in options.items() if k in names}}
        if spec.guide is not None:
            if "guide" not in names:
                raise ValueError(f"method {spec.method!r} takes no guide; write {spec.method} instead of "
                                 f"{spec.method}:{spec.guide}")
            chosen["guide"] = spec.guide
        routed.append(chosen)
    return routed


def check_methods_fit(model: BayesianNetwork, specs: Sequence[MethodSpec], routed: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, before any fit, options a method does not accept and a network a method cannot fit (what it needs of
    the network, the hierarchical priors it cannot fit), so that no fit runs only to be followed by a refusal."""
    for spec, options in zip(specs, routed):
        method = METHODS.get(spec.method)
        method.parse(options, model)
        method.check_model(model, point_values_set=not needs_point_fit(model))


def fit_or_reuse(model: BayesianNetwork, dataset: Dataset, specs: Sequence[MethodSpec],
                 routed: Sequence[Mapping[str, Any]], kept: FinishedFits, command: str) -> list:
    """Each fit of the comparison: reused from ``kept`` when an earlier run of the same comparison finished it, else
    run and kept there as soon as it finishes. Ctrl-C or SIGTERM (a Markov-chain, MC dropout or ensemble fit returns
    ``incomplete``) ends the loop with ``KeyboardInterrupt`` naming what was kept and how to go on."""
    fits = []
    try:
        for index, (spec, options) in enumerate(zip(specs, routed)):
            posterior = kept.load(index, spec.method)
            if posterior is not None:
                print(f"reusing the finished {spec.method} fit of an earlier run of this command: "
                      f"{kept.path(index, spec.method)}")
            else:
                posterior = fit(model, dataset, spec.method, **options)
                if posterior.record.interrupted is not None:
                    raise KeyboardInterrupt(f"{spec.method}: {posterior.record.interrupted}")
                kept.save(index, spec.method, posterior)
            fits.append(posterior)
    except KeyboardInterrupt as error:
        raise KeyboardInterrupt(comparison_interrupted(str(error) or "SIGINT", kept, command)) from None
    return fits


def comparison_interrupted(reason: str, kept: FinishedFits, command: str) -> str:
    """What an interrupted comparison says: why, which finished fits are on disk, and what reuses them."""
    saved = [path.name for path in kept.saved()]
    if not saved:
        return f"compare stopped ({reason}) before any fit finished; nothing was kept"
    return (f"compare stopped ({reason}); the finished fits {', '.join(saved)} are kept in {kept.folder}: run the same "
            f"command again to reuse them: {command}")


def is_saved(reference: str | Path | None) -> bool:
    """Whether ``reference`` names a folder (a saved fit) rather than a method."""
    return reference is not None and (isinstance(reference, Path) or Path(reference).is_dir())


def referenced_spec(specs: Sequence[MethodSpec], reference: str) -> MethodSpec:
    """The one fit of ``specs`` whose method is ``reference`` (``ValueError`` for none or several)."""
    matches = [spec for spec in specs if spec.method == reference]
    if len(matches) != 1:
        found = "no fit" if not matches else f"{len(matches)} fits"
        raise ValueError(f"--reference {reference!r} names {found} of this comparison "
                         f"({', '.join(spec.method for spec in specs)}): name one method of --methods, or give the "
                         "folder of a saved fit")
    return matches[0]


def run_comparison(data: Dataset, methods: str | Sequence[str | MethodSpec] = DEFAULT_METHODS, *,
                   model: BayesianNetwork | Callable[[Dataset], BayesianNetwork], out: str | Path,
                   options: Mapping[str, Any] | None = None, time_budget: float | str | None = None,
                   ood: str | None = None, conformal: float | None = None, seed: int = 0, overwrite: bool = False,
                   progress: bool = True, command: str | None = None, reference: str | Path | None = None
                   ) -> pd.DataFrame:
    """Fit every method in ``methods`` on the same model and data, and write the comparison report into ``out``.

    Parameters
    ----------
    data : Dataset
        The data: the fits learn from its training split and are scored on its test split.
    methods : str or sequence
        ``"svi,nuts,laplace"``, or a list of names; ``"svi:meanfield"`` chooses a guide.
    model : BayesianNetwork or callable
        The network, or ``model(dataset) -> BayesianNetwork`` to build it for the data the fits learn from (which
        ``ood="held-out-classes"`` and ``conformal`` change).
    out : str or Path
        The report folder, written atomically; it holds ``report.md``, the table as CSV, the plots.
    options : mapping, optional
        Fit options, each given to the methods that take it (``num_samples``, ``steps``, ...); a name no chosen method
        takes is refused. ``seed`` and ``progress`` are this function's own arguments.
    time_budget : float or str, optional
        Seconds (or ``"90s"``, ``"10m"``, ``"1h30m"``) the fits and the report should fit in: draws and steps are
        lowered, or methods left out, by each method's cost estimated before any fit.
    ood : str, optional
        A shift set (:data:`~bnn.inference.evaluation.shift_sets.SHIFT_SETS`) whose detection by each fit's
        uncertainty the report scores.
    conformal : float, optional
        The share of the training rows held out of every fit to calibrate each fit's conformal 90% sets.
    seed : int
        The seed of every fit and of the data's carving.
    overwrite : bool
        Replace an ``out`` that holds a result of this tool.
    progress : bool
        Show progress bars.
    command : str, optional
        How to run this comparison again, for the report and the message of an interrupted run (default: a call of
        this function).
    reference : str or Path, optional
        The posterior every other fit is measured against (:mod:`bnn.experiments.comparison.reference`): the name of
        one method of ``methods`` (``"nuts"``), or the folder of a fit of the same network and data saved by
        :meth:`~bnn.inference.core.posterior.Posterior.save` (read, and its own check made, before any fit).

    Returns
    -------
    pandas.DataFrame
        The comparison table, a row per fit (:func:`~bnn.inference.evaluation.compare.compare`); its
        ``attrs["warnings"]`` lists each failed check, ``attrs["report_seconds"]`` the report's time and
        ``attrs["report_estimate"]`` its estimate.

    Raises
    ------
    ValueError
        Before any fit: an unknown method, guide, option or shift set, an option no chosen method takes, a network a
        method cannot fit, an ``out`` that cannot be written or holds a result without ``overwrite``, an ``out``
        another process writes now (:func:`~bnn.runtime.atomic.writing`: the run holds ``out``'s lock from here to
        its report's swap), a budget in which no method fits, a ``reference`` that names no single method of
        ``methods`` (or one the budget leaves out), a saved reference of another network or data or that fails its
        own check.
    KeyboardInterrupt
        On Ctrl-C or SIGTERM, saying which finished fits are kept and what reuses them.
    """
    lock_command = command  # None: a refused second writer is told how this process was started
    command = command or "run_comparison(...) with the same arguments"
    budget = parse_duration(time_budget) if isinstance(time_budget, str) else time_budget
    specs = method_specs(methods)
    given = {**(options or {}), "seed": seed, "progress": progress}
    routed = options_per_method(specs, given)
    check_replaceable(out, overwrite=True)
    check_writable(out)
    # one writer of out from here to the report's swap: a second comparison (or fit) of it is refused at once;
    # SIGTERM ends the run as Ctrl-C does, saying what was kept
    with writing(out, writer="bnn compare", command=lock_command), sigterm_as_keyboard_interrupt():
        check_replaceable(out, overwrite=overwrite)  # a result another run finished since the check above
        shift = shift_split(data, ood) if ood is not None else None
        dataset = shift.dataset if shift is not None else data  # held-out-classes trains without some classes
        calibration = None
        if conformal is not None:  # carved before any fit, with enough rows for 90% sets
            dataset, calibration, shift = carve_calibration_with_shift(data, shift, conformal, seed)
            calibration_rank(len(calibration[0]), SET_LEVEL_ALPHA)
        network = model(dataset) if callable(model) and not isinstance(model, BayesianNetwork) else model
        check_methods_fit(network, specs, routed)
        saved = saved_reference(Path(reference), network, dataset) if is_saved(reference) else None
        reference_spec = referenced_spec(specs, reference) if reference is not None and saved is None else None
        plan = choose_fits(network, dataset, [spec.method for spec in specs], routed, budget)
        cost_notes = cost_lines(plan, budget)
        print("\n".join(cost_notes))
        if all(choice.skipped for choice in plan.fits):
            raise ValueError(f"no method fits in the time budget {format_seconds(budget)}: raise it, or ask for fewer "
                             "draws or steps (see the estimates above)")
        specs = [spec for spec, choice in zip(specs, plan.fits) if not choice.skipped]
        if reference_spec is not None and reference_spec not in specs:
            raise ValueError(f"the time budget leaves out {reference_spec.method}, the --reference: raise "
                             "--time-budget, or give a saved reference's folder")
        routed = [choice.options for choice in plan.fits if not choice.skipped]
        kept = FinishedFits(Path(out), run_fingerprint(network, dataset, [(spec.method, options) for spec, options
                                                                          in zip(specs, routed)]),
                            module=network.state_module())
        posteriors = label_fits(fit_or_reuse(network, dataset, specs, routed, kept, command))
        if saved is not None:
            compared_with = (f"saved {saved.record.label}", saved)
        elif reference_spec is not None:  # the labels keep the fits' order
            compared_with = list(posteriors.items())[specs.index(reference_spec)]
        else:
            compared_with = None
        try:
            began = time.perf_counter()
            table = write_comparison(posteriors, dataset, out, command=command, overwrite=overwrite, progress=progress,
                                     cost_notes=cost_notes, ood=shift, calibration=calibration,
                                     reference=compared_with)
            table.attrs["report_seconds"] = time.perf_counter() - began
            table.attrs["report_estimate"] = plan.report.seconds
        except KeyboardInterrupt as error:
            raise KeyboardInterrupt(comparison_interrupted(f"{str(error) or 'SIGINT'} while writing the report", kept,
                                                           command)) from None
        kept.discard()
    return table
