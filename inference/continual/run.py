r"""The continual benchmark: each method learns the tasks in order and is scored on every task seen so far.

After task :math:`t` a method is scored on the test data of tasks :math:`0..t` (accuracy, or the RMSE of the
predictive mean for regression). Every finished task is written atomically to ``<out>/<method>/task-<t>/``:
``metrics.json`` (the scores, the seconds), ``carry.json`` (what the next task starts from: the posterior as a
prior's config, the MAP weights, the coreset) and ``posterior/`` (a saved
:class:`~bnn.inference.core.posterior.Posterior`, Bayesian methods). A rerun with the same ``--out`` reads the finished
tasks and goes on from the next one; ``run.json`` keeps the benchmark and options, and a rerun with others is refused.
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
from bnn.inference.continual.bayesian import online_laplace, vcl, vcl_coreset
from bnn.inference.continual.learned import Learned
from bnn.inference.continual.map_training import finetune, joint
from bnn.inference.continual.options import ContinualOptions
from bnn.inference.continual.setup import ContinualSetup

from bnn.registry import Registry
from bnn.runtime.atomic import atomic_directory, check_writable, write_json

CONTINUAL_METHODS: Registry[Callable[[ContinualSetup, int, dict[str, Any]], Learned]] = Registry("continual method")
CONTINUAL_METHODS.register("vcl", vcl)
CONTINUAL_METHODS.register("vcl-coreset", vcl_coreset)
CONTINUAL_METHODS.register("online-laplace", online_laplace)
CONTINUAL_METHODS.register("finetune", finetune)
CONTINUAL_METHODS.register("joint", joint)

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


def _check_run_file(out: Path, description: dict[str, Any]) -> None:
    """Resume the run in ``out`` when its settings are ``description``, or start one in a new or empty ``out``; refuse
    anything else (other settings, a file, a folder holding files of something else, a folder that cannot be written)
    before any work."""
    run_file = out / RUN_FILE
    if run_file.is_file():
        found = json.loads(run_file.read_text())
        if found != description:
            raise ValueError(f"{out} holds a continual run with other settings ({found}); resume it with those, or "
                             f"choose another --out for {description}")
        return
    blocking = next((path for path in (out, *out.parents) if path.exists() and not path.is_dir()), None)
    if blocking is not None:
        raise ValueError(f"{blocking} is a file, not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(f"{out} holds files that are not a continual run (no {RUN_FILE}); a run writes only into a new "
                         "or empty folder, or resumes its own: choose another --out")
    check_writable(run_file)
    out.mkdir(parents=True, exist_ok=True)
    write_json(run_file, description)


def _learn_task(setup: ContinualSetup, method: str, task: int, carry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Learn task ``task``, score tasks ``0..task``, write the task's folder atomically; return its metrics."""
    began = time.perf_counter()
    learned = CONTINUAL_METHODS.get(method)(setup, task, carry)
    scores = [setup.score(learned.predict(x), y) for x, y in map(setup.test_data, range(task + 1))]
    metrics = {"method": method, "task": task, "scores": scores, "seconds": time.perf_counter() - began}
    with atomic_directory(folder, overwrite=True) as staging:
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
        For an unknown benchmark, method or option, or an ``out`` holding a run with other settings, before any work.
    """
    options = ContinualOptions.parse("continual", options)
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of names from {CONTINUAL_METHODS.names()}, got {methods!r}")
    for method in methods:
        CONTINUAL_METHODS.get(method)
    if not isinstance(benchmark, ContinualBenchmark):
        benchmark = load_continual_benchmark(benchmark)
    setup, out = ContinualSetup(benchmark, options), Path(out)
    _check_run_file(out, {"benchmark": benchmark.name, "options": json.loads(json.dumps(dataclasses.asdict(options)))})
    scores, seconds = {}, {}
    for method in methods:
        carry: dict[str, Any] = {}
        scores[method], seconds[method] = [], []
        for task in range(setup.num_tasks):
            folder = out / method / f"task-{task}"
            if (folder / METRICS_FILE).is_file():
                metrics = json.loads((folder / METRICS_FILE).read_text())
                line = "kept"
            else:
                metrics = _learn_task(setup, method, task, carry, folder)
                line = "learnt"
            carry = json.loads((folder / CARRY_FILE).read_text())
            scores[method].append(metrics["scores"])
            seconds[method].append(metrics["seconds"])
            if report is not None:
                report(f"{method}: task {task} {line}, scores {[round(s, 4) for s in metrics['scores']]}")
    metric = "accuracy" if benchmark.is_classification else "rmse"
    return ContinualResult(benchmark.name, metric, [task.name for task in benchmark.tasks], scores, seconds)
