r"""The continual run as tables and a plot: the average score after each task, the forgetting, every task's curve.

With :math:`a_{t,j}` the score on task :math:`j` after learning task :math:`t` (:math:`j \le t`, :math:`T` tasks):

.. math::

    \bar a_t = \frac{1}{t + 1}\sum_{j=0}^{t} a_{t,j}, \qquad
    \text{forgetting} = \frac{1}{T - 1}\sum_{j=0}^{T-2} \pm\,(a_{j,j} - a_{T-1,j}),

the average over the tasks seen so far and the mean loss on a task between just after learning it and the end
(sign :math:`+` for accuracy, :math:`-` for RMSE, so that a positive number is always forgetting).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from bnn.experiments.continual.run import ContinualResult
from bnn.runtime.atomic import atomic_file, write_json

PLOT_FILE, REPORT_FILE, RESULT_FILE = "continual.png", "report.md", "continual.json"


def average_after_each_task(scores: list[list[float]]) -> list[float]:
    r""":math:`\bar a_t` for every :math:`t` (module notes)."""
    return [sum(row) / len(row) for row in scores]


def forgetting(scores: list[list[float]], metric: str) -> float | None:
    """The mean loss on a task from just after learning it to the end (module notes); ``None`` for one task."""
    last = scores[-1]
    if len(last) < 2:
        return None
    sign = 1.0 if metric == "accuracy" else -1.0
    return sum(sign * (scores[j][j] - last[j]) for j in range(len(last) - 1)) / (len(last) - 1)


def markdown_tables(result: ContinualResult) -> str:
    """Two markdown tables: the average after each task with the forgetting and time, and the final score per task."""
    tasks = range(len(result.task_names))
    lines = [f"Average {result.metric} over the tasks seen so far, after each task; forgetting (module notes); seconds:",
             "", "| method | " + " | ".join(f"after {t + 1}" for t in tasks) + " | forgetting | seconds |",
             "|---|" + "---|" * (len(result.task_names) + 2)]
    for method, scores in result.scores.items():
        averages = " | ".join(f"{a:.4f}" for a in average_after_each_task(scores))
        lost = forgetting(scores, result.metric)
        lines.append(f"| {method} | {averages} | {'' if lost is None else f'{lost:.4f}'} | "
                     f"{sum(result.seconds[method]):.0f} |")
    lines += ["", f"{result.metric.capitalize()} on each task after the last one:", "",
              "| method | " + " | ".join(result.task_names) + " |", "|---|" + "---|" * len(result.task_names)]
    lines += [f"| {method} | " + " | ".join(f"{s:.4f}" for s in scores[-1]) + " |" for method, scores in result.scores.items()]
    return "\n".join(lines) + "\n"


def plot_continual(result: ContinualResult, path: str | Path) -> None:
    """One panel per task (its score after each task learnt since) and one of the average, a line per method."""
    count = len(result.task_names)
    figure, axes = plt.subplots(1, count + 1, figsize=(2.6 * (count + 1), 2.8), sharey=True)
    learnt = range(1, count + 1)
    for method, scores in result.scores.items():
        for j in range(count):
            axes[j].plot(learnt[j:], [scores[t][j] for t in range(j, count)], marker="o", label=method)
        axes[-1].plot(learnt, average_after_each_task(scores), marker="o", label=method)
    for j, axis in enumerate(axes[:-1]):
        axis.set_title(f"task {result.task_names[j]}", fontsize=9)
    axes[-1].set_title("average", fontsize=9)
    for axis in axes:
        axis.set_xticks(list(learnt))
        axis.set_xlabel("tasks learnt")
    axes[0].set_ylabel(result.metric)
    axes[-1].legend(fontsize=7)
    figure.suptitle(result.benchmark)
    figure.tight_layout()
    with atomic_file(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=110)
    plt.close(figure)


def write_continual_report(result: ContinualResult, out: str | Path, command: str | None = None) -> Path:
    """Write ``report.md`` (the command, the tables, the plot), ``continual.png`` and ``continual.json`` into ``out``."""
    out = Path(out)
    plot_continual(result, out / PLOT_FILE)
    write_json(out / RESULT_FILE, {"benchmark": result.benchmark, "metric": result.metric, "tasks": result.task_names,
                                   "scores": result.scores, "seconds": result.seconds})
    header = f"# Continual learning: {result.benchmark}\n\n" + (f"`{command}`\n\n" if command else "")
    with atomic_file(out / REPORT_FILE) as handle:
        handle.write(header + markdown_tables(result) + f"\n![{result.benchmark}]({PLOT_FILE})\n")
    return out / REPORT_FILE
