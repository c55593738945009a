r"""The continual benchmark: each method learns the tasks in order and is scored on every task seen so far.

After task :math:`t` a method is scored on the test data of tasks :math:`0..t` (accuracy, or the RMSE of the
predictive mean for regression). Every finished task is written atomically to ``<out>/<method>/task-<t>/``:
``metrics.json`` (the scores, the seconds), ``carry.json`` (what the next task starts from: the posterior as a
prior's config, the MAP weights, the coreset) and ``posterior/`` (a saved
:class:`~bnn.inference.core.posterior.Posterior`: VCL, VCL with a coreset, online Laplace; UCL and BGD keep their
mean-field Gaussian in ``carry.json``). A rerun with the same ``--out`` reads the finished
tasks and goes on from the next one; ``run.json`` keeps the benchmark and options, and a rerun with others is refused.
``<out>`` is a run folder of ``bnn continual`` (:mod:`bnn.runtime.run_folder`): refused when it holds anything else,
locked while a run writes into it, so that a second run of the same folder is refused instead of racing the first.
A damaged file of the run is named, with what to do about it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bnn.datasets.continual import ContinualBenchmark, load_continual_benchmark
from bnn.inference.continual.methods import CONTINUAL_METHODS
from bnn.inference.continual.options import ContinualOptions
from bnn.inference.continual.setup import ContinualSetup
from bnn.runtime.atomic import atomic_directory, write_json
from bnn.runtime.run_folder import check_run_folder, locked_run_folder

RUN_FILE, METRICS_FILE, CARRY_FILE, POSTERIOR_FOLDER = "run.json", "metrics.json", "carry.json", "posterior"


@dataclass(frozen=True)
class ContinualResult:
    """The scores of a continual run.

    Attributes
    ----------
    benchmark : str
        The benchmark's name.
    metric : str
        ``"accuracy"`` (higher is better) or ``"rmse"`` (lower is better).
    task_names : list of str
        The tasks, in order.
    scores : dict of str to list of list of float
        ``scores[method][t][j]``: the score on task ``j`` after learning task ``t`` (``j <= t``).
    seconds : dict of str to list of float
        ``seconds[method][t]``: the time task ``t`` took to learn and score.
    """

    benchmark: str
    metric: str
    task_names: list[str]
    scores: dict[str, list[list[float]]]
    seconds: dict[str, list[float]]


def run_entries() -> set[str]:
    """What a continual run writes into its folder: ``run.json`` and one folder per method."""
    return {RUN_FILE, *CONTINUAL_METHODS.names()}


def read_run_file(path: Path, advice: str) -> Any:
    """The JSON of the run's file ``path``; a damaged one raises ``ValueError`` naming it, with ``advice``."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is damaged ({error}); {advice}") from None


def _check_run_file(out: Path, description: dict[str, Any]) -> None:
    """Resume the run in ``out`` (checked by :func:`~bnn.runtime.run_folder.check_run_folder`) when its settings are
    ``description``, or start one in a new or empty ``out``; refuse other settings before any work."""
    run_file = out / RUN_FILE
    if run_file.is_file():
        found = read_run_file(run_file, "the run's settings are lost with it, so its tasks cannot be resumed: choose "
                                        "another --out")
        if found != description:
            raise ValueError(f"{out} holds a continual run with other settings ({found}); resume it with those, or "
                             f"choose another --out for {description}")
        return
    if any(path.name in CONTINUAL_METHODS.names() for path in out.iterdir()):
        raise ValueError(f"{out} holds the tasks of a continual run without its {RUN_FILE}, so their settings are "
                         "unknown: choose another --out")
    write_json(run_file, description)


def _learn_task(setup: ContinualSetup, method: str, task: int, carry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Learn task ``task``, score tasks ``0..task``, write the task's folder atomically; return its metrics."""
    began = time.perf_counter()
    learned = CONTINUAL_METHODS.get(method)(setup, task, carry)
    scores = [setup.score(learned.predict(x), y) for x, y in map(setup.test_data, range(task + 1))]
    metrics = {"method": method, "task": task, "scores": scores, "seconds": time.perf_counter() - began}
    with atomic_directory(folder, writer="bnn continual", overwrite=True) as staging:
        write_json(staging / METRICS_FILE, metrics)
        write_json(staging / CARRY_FILE, learned.carry)
        if learned.posterior is not None:
            (staging / POSTERIOR_FOLDER).mkdir()
            learned.posterior.write_into(staging / POSTERIOR_FOLDER)
    return metrics


def run_continual(benchmark: str | ContinualBenchmark, methods: Sequence[str], out: str | Path, *,
                  report: Callable[[str], None] | None = None, **options: Any) -> ContinualResult:
    """Run ``methods`` on ``benchmark`` task by task, resuming from what ``out`` holds (see the module notes).

    Parameters
    ----------
    benchmark : str or ContinualBenchmark
        A name in :data:`~bnn.datasets.continual.CONTINUAL_BENCHMARKS` or a benchmark.
    methods : sequence of str
        Names in :data:`CONTINUAL_METHODS`.
    out : str or Path
        The run's folder.
    report : callable, optional
        Called with one line per finished task.
    **options
        The fields of :class:`~bnn.inference.continual.options.ContinualOptions`.

    Raises
    ------
    ValueError
        For an unknown benchmark, method or option, an ``out`` holding a run with other settings or anything but a run
        of its own, or one that another run is writing into, before any work; for a damaged file of the run, naming it.
    KeyboardInterrupt
        On Ctrl-C or SIGTERM, saying how many finished tasks are kept (the task in flight is lost).
    """
    options = ContinualOptions.parse("continual", options)
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of names from {CONTINUAL_METHODS.names()}, got {methods!r}")
    for method in methods:
        CONTINUAL_METHODS.get(method)
    if not isinstance(benchmark, ContinualBenchmark):
        benchmark = load_continual_benchmark(benchmark)
    setup, out = ContinualSetup(benchmark, options), Path(out)
    check_run_folder(out, "continual", run_entries(), unmarked_run=lambda folder: (folder / RUN_FILE).is_file())
    with locked_run_folder(out, "continual", run_entries()):
        _check_run_file(out, {"benchmark": benchmark.name, "options": json.loads(json.dumps(dataclasses.asdict(options)))})
        try:
            scores, seconds = learn_all(setup, methods, out, report)
        except KeyboardInterrupt as interrupt:
            kept = sum(1 for _ in out.glob(f"*/task-*/{METRICS_FILE}"))
            raise KeyboardInterrupt(f"{str(interrupt) or 'Ctrl-C'}: the {kept} finished task(s) are kept in {out}; the "
                                    "same command resumes from them") from None
    metric = "accuracy" if benchmark.is_classification else "rmse"
    return ContinualResult(benchmark.name, metric, [task.name for task in benchmark.tasks], scores, seconds)


def learn_all(setup: ContinualSetup, methods: Sequence[str], out: Path, report: Callable[[str], None] | None
              ) -> tuple[dict[str, list[list[float]]], dict[str, list[float]]]:
    """Each method's scores and seconds per task: read from ``out`` for the tasks finished there, else learnt and
    written there."""
    scores, seconds = {}, {}
    for method in methods:
        carry: dict[str, Any] = {}
        scores[method], seconds[method] = [], []
        for task in range(setup.num_tasks):
            folder = out / method / f"task-{task}"
            damaged = f"remove {folder} to learn the task again"
            if (folder / METRICS_FILE).is_file():
                metrics = read_run_file(folder / METRICS_FILE, damaged)
                line = "kept"
            else:
                metrics = _learn_task(setup, method, task, carry, folder)
                line = "learnt"
            carry = read_run_file(folder / CARRY_FILE, damaged)
            scores[method].append(metrics["scores"])
            seconds[method].append(metrics["seconds"])
            if report is not None:
                report(f"{method}: task {task} {line}, scores {[round(s, 4) for s in metrics['scores']]}")
    return scores, seconds
