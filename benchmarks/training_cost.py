"""What a Bayesian fit costs against a plain PyTorch training of the same network, side by side in one run.

The plain training follows one fixed recipe on every data set: the network's weights as PyTorch parameters
(initialised as ``nn.Linear`` and ``nn.Conv`` do, uniform on :math:`\\pm 1/\\sqrt{\\text{fan-in}}`), Adam at rate
1e-3, minibatches of 128, at most 200 epochs, early stopping with a patience of 10 epochs on the loss of a random fifth
of the training split held out, the best epoch's weights restored; the loss is the likelihood's negative
log-density (a learned noise scale for regression), computed on the torch threads every fit computes on (one, unless
the user chose a count), so that both are timed alike. Then each method is fitted at its defaults on the same data, one
after the other. Each fit prints one line,

    cost method=<name> seconds=<s> ratio=<s / plain seconds> accuracy=<a> test_ll=<l> check=<passed|what failed>

(``rmse=`` for regression), the plain training first, and the rows are kept in ``training_cost/results.csv`` (a
row per data set, model and method, replaced by a new run of the same) with the run's command, commit, machine and
date, written after each fit; ``benchmarks/results/training_cost.md``'s tables are made from that CSV (:func:`tables_from_csv`).

Usage::

    python -m benchmarks.training_cost --dataset digits --model cnn [--methods map,laplace,...]
    python -m benchmarks.training_cost --dataset protein-tertiary-structure --uci-dir UCI_DIR --model mlp
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
from bnn.datasets import load_dataset
from bnn.datasets.dataset import Dataset
from bnn.inference import METHODS, Posterior, fit
from bnn.inference.core.chain_record import ChainRecord
from bnn.inference.core.device import computing_on, device_option, moved, resolved_device
from bnn.inference.core.record import FitRecord
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.nuts.lowering import ACTIVATION_LAYERS
from bnn.models import ARCHITECTURES, BayesianCNN, BayesianNetwork, from_module, get_likelihood
from bnn.models.network import network_from_config
from torch import nn

from benchmarks.provenance import merged_rows, run_header, run_lines
from bnn.experiments.uci.grid import hidden_units
from bnn.experiments.uci.protocol import uci_model
from bnn.runtime.atomic import atomic_file
from bnn.runtime.workers import fit_threads

RESULTS = Path(__file__).parent / "results" / "training_cost"
CSV = RESULTS / "results.csv"
PLAIN = "plain"
RECIPE = {"lr": 1e-3, "batch_size": 128, "max_epochs": 200, "patience": 10, "validation_fraction": 0.2}
"""The plain training's recipe (module notes)."""
TARGETS = {"map": 1.5, "laplace": 2.0, "mc-dropout": 1.5, "swag": 2.0, "svi": 3.0, "sgld": 3.0, "sghmc": 3.0,
           "csgld": 3.0, "ensemble": 5.0, "multiswag": 5.0, "ivon": 1.3, "nuts": 10.0}
"""Each method's time target: at most this multiple of the plain training's (:func:`target_missed`)."""
ACCURACY_MARGIN = 0.01
"""How far below the plain training's a fit's test accuracy may be within its target: one point."""
DEFAULT_METHODS = [name for name in TARGETS if name != "nuts" and name in METHODS]
"""The methods a run fits unless ``--methods`` says otherwise: every method that scales (NUTS needs a last-layer
network on large data)."""
COLUMNS = ["dataset", "model", "method", "seconds", "ratio", "target", "accuracy", "rmse", "test_ll", "check",
           "command", "commit", "machine", "date"]


@dataclasses.dataclass(kw_only=True)
class PlainRecord(FitRecord):
    """The record of the plain training, for scoring it as a one-draw posterior (not a method of the collection)."""

    method: ClassVar[str] = PLAIN
    epochs: int
    best_epoch: int
    validation_loss: float


def initial_weights(model: BayesianNetwork, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Each site uniform on :math:`\\pm 1/\\sqrt{\\text{fan-in}}`, as PyTorch initialises its layers (drawn on the
    CPU, so that a seed gives the same start on every device)."""
    weights = {}
    for site in model.sites:
        bound = 1.0 / math.sqrt(site.fan_in)
        weights[site.name] = (torch.rand(site.shape, generator=generator, device="cpu") * 2 - 1) * bound
    return weights


def held_out(x: torch.Tensor, y: torch.Tensor, generator: torch.Generator) -> tuple[tuple[torch.Tensor, torch.Tensor],
                                                                                   tuple[torch.Tensor, torch.Tensor]]:
    """The recipe's validation rows (a random fifth) and the rest, ``((x_val, y_val), (x_fit, y_fit))``."""
    order = torch.randperm(len(x), generator=generator, device="cpu")
    held = max(1, round(RECIPE["validation_fraction"] * len(x)))
    return (x[order[:held]], y[order[:held]]), (x[order[held:]], y[order[held:]])


def plain_training(model: BayesianNetwork, dataset: Dataset, seed: int,
                   device: torch.device = torch.device("cpu")) -> tuple[Posterior, float]:
    """The network trained by the recipe (module notes) on ``device``: a one-draw posterior on the CPU at the best
    epoch's weights (a learned noise held fixed at its fitted value) and the wall time."""
    generator = torch.Generator().manual_seed(seed)
    x, y = dataset.x_train, model.likelihood.check_targets(dataset.y_train, model.out_features)
    (x_val, y_val), (x_fit, y_fit) = ((part.to(device) for part in split) for split in held_out(x, y, generator))
    network = model if device.type == "cpu" else moved(model, device)
    weights = {name: torch.nn.Parameter(value.to(device)) for name, value in initial_weights(model, generator).items()}
    learned_noise = "sigma" in model.likelihood.latent_priors()
    log_noise = torch.nn.Parameter(torch.zeros((), device=device))
    parameters = [*weights.values(), *([log_noise] if learned_noise else [])]
    optimiser = torch.optim.Adam(parameters, lr=RECIPE["lr"])

    def loss(xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        latents = {"sigma": log_noise.exp()} if learned_noise else {}
        return -network.likelihood.distribution(network.forward(xb, weights), latents).log_prob(yb).mean()

    began = time.perf_counter()
    best, best_state, best_epoch, since, epochs = math.inf, None, 0, 0, 0
    while epochs < RECIPE["max_epochs"]:
        epochs += 1
        for batch in torch.randperm(len(x_fit), generator=generator, device="cpu").split(RECIPE["batch_size"]):
            optimiser.zero_grad()
            loss(x_fit[batch], y_fit[batch]).backward()
            optimiser.step()
        with torch.no_grad():
            validation = loss(x_val, y_val).item()
        if validation < best:
            best, since = validation, 0
            best_state, best_epoch = [value.detach().to("cpu", copy=True) for value in parameters], epochs
        else:
            since += 1
            if since >= RECIPE["patience"]:
                break
    seconds = time.perf_counter() - began
    values = dict(zip(weights, best_state))
    config = model.config()
    if learned_noise:
        config = {**config, "likelihood": {**config["likelihood"], "scale": float(best_state[-1].exp())}}
    fixed = network_from_config(config)
    samples = {name: value[None, None] for name, value in values.items()}
    record = PlainRecord(seed=seed, train_seconds=seconds, epochs=epochs, best_epoch=best_epoch, validation_loss=best)
    return Posterior(fixed, samples, x, y, record), seconds


def build_network(dataset: Dataset, architecture: str, uci_dir: Path | None, **flags: Any) -> BayesianNetwork:
    """The network a fit of ``dataset`` uses: the UCI grid's MLP on a UCI set, else ``architecture`` at its
    command-line defaults for the data set's shape, or at ``flags`` where given (``hidden=(10,)``)."""
    if uci_dir is not None:
        return uci_model(dataset.in_features, hidden_units(uci_dir / dataset.name))
    likelihood = {"name": dataset.likelihood_name, **({"scale": None} if dataset.task == "regression" else {})}
    chosen = ARCHITECTURES.get(architecture)
    outputs = get_likelihood(likelihood).network_outputs(dataset.out_features)
    defaults = {flag.name: flag.default for flag in chosen.command_line.flags} | flags
    return chosen.for_data(dataset.in_features, outputs, dataset.input_shape, prior={"name": "gaussian"},
                           likelihood=likelihood, **defaults)


def torch_twin(model: BayesianNetwork) -> nn.Module:
    """``model`` (a :class:`~bnn.models.BayesianMLP` or :class:`~bnn.models.BayesianCNN`) written as a torch module of
    standard layers, initialised as PyTorch initialises them: the network that ``--methods nuts`` fits through
    ``from_module(..., bayesian="last-layer")``."""
    activation = {name: layer for layer, (name, _) in ACTIVATION_LAYERS.items()}[model.activation]
    layers: list[nn.Module] = []
    width = model.in_features
    if isinstance(model, BayesianCNN):
        axes = len(model.input_shape)
        convolution = (nn.Conv1d, nn.Conv2d)[axes - 1]
        pooling = {"avg": (nn.AvgPool1d, nn.AvgPool2d), "max": (nn.MaxPool1d, nn.MaxPool2d)}[model.pooling][axes - 1]
        layers.append(nn.Unflatten(1, (1, *model.input_shape)))
        for c_in, c_out in zip((1, *model.channels), model.channels):
            layers += [convolution(c_in, c_out, model.kernel_size, padding=model.padding), activation(),
                       pooling(model.pool)]
        layers.append(nn.Flatten())
        width = next(site.fan_in for site in model.sites if site.name == "classifier.0.weight")
    widths = (width, *model.hidden, model.out_features)
    for index, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers += [nn.Linear(fan_in, fan_out), *([activation()] if index < len(widths) - 2 else [])]
    return nn.Sequential(*layers)


def last_layer_network(model: BayesianNetwork, seed: int) -> BayesianNetwork:
    """The torch twin of ``model`` (:func:`torch_twin`, initialised from ``seed``) Bayesian in its last layer, with
    ``model``'s likelihood: what NUTS fits on data too large for a sampler over every weight."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = torch_twin(model)
    return from_module(module, likelihood=model.config()["likelihood"], bayesian="last-layer",
                       in_features=model.in_features)


def check(posterior: Posterior) -> str:
    """``passed``, ``no check`` for a method without one, or what failed: the record's problems and, for Markov
    chains, their diagnostics' (whose verdict is not among the record's problems)."""
    record = posterior.record
    if record.converged is None:
        return "no check"
    if record.converged:
        return "passed"
    chains = record.diagnostics.problems() if isinstance(record, ChainRecord) else []
    return "; ".join([*record.problems(), *chains]) or "failed"


def cost_row(dataset: Dataset, architecture: str, method: str, posterior: Posterior, seconds: float,
             plain_seconds: float, header: dict[str, str]) -> dict[str, Any]:
    """One fit's row: its time, its ratio to the plain training, its test metrics and its own check."""
    metrics = evaluate(posterior, dataset)
    return {"dataset": dataset.name, "model": architecture, "method": method, "seconds": seconds,
            "ratio": seconds / plain_seconds, "target": TARGETS.get(method, 1.0),
            "accuracy": metrics.get("test_accuracy", math.nan), "rmse": metrics.get("test_rmse", math.nan),
            "test_ll": metrics["test_ll"], "check": "passed" if method == PLAIN else check(posterior), **header}


def cost_line(row: dict[str, Any]) -> str:
    """The printed line of a row (module notes)."""
    score = f"accuracy={row['accuracy']:.4f}" if not math.isnan(row["accuracy"]) else f"rmse={row['rmse']:.4f}"
    return (f"cost method={row['method']} seconds={row['seconds']:.1f} ratio={row['ratio']:.2f} {score} "
            f"test_ll={row['test_ll']:.4f} check={row['check']}")


def target_missed(row: dict[str, Any], plain: dict[str, Any]) -> list[str]:
    """What a fit's row misses of its target against the plain training's row: ``time`` (a ratio above
    :data:`TARGETS`), ``check`` (its own check not passed, or none), ``test LL`` (below the plain network's),
    ``accuracy`` (more than :data:`ACCURACY_MARGIN` below it); empty where the target is met."""
    return [name for name, failed in (
        ("time", row["ratio"] > row["target"]),
        ("check", row["check"] != "passed"),
        ("test LL", row["test_ll"] < plain["test_ll"]),
        ("accuracy", row["accuracy"] < plain["accuracy"] - ACCURACY_MARGIN),  # NaN for regression: never
    ) if failed]


def tables_from_csv(path: Path) -> str:
    """``training_cost.md``'s tables from the CSV alone: per data set and model, each fit's time, ratio to the plain
    training and target, whether it met its target (:func:`target_missed`: the plain training's row is the first of
    its table), test metrics and own check, and the run lines."""
    text = ["dataset", "model", "method", "check", "command", "commit", "machine", "date"]
    frame = pd.read_csv(path, dtype={column: str for column in text})
    frame[text] = frame[text].fillna("")
    rows = frame.to_dict("records")
    blocks, shown = [], []
    for (dataset, model) in dict.fromkeys((row["dataset"], row["model"]) for row in rows):
        group = sorted((row for row in rows if (row["dataset"], row["model"]) == (dataset, model)),
                       key=lambda row: row["method"] != PLAIN)  # the plain training first, the fits in the CSV's order
        regression = all(math.isnan(row["accuracy"]) for row in group)
        score = "rmse" if regression else "accuracy"
        lines = [f"{dataset}, {model}", "", f"| method | seconds | ratio | target | met | {score} | test_ll | check |",
                 "|---|---|---|---|---|---|---|---|"]
        plain = next(row for row in group if row["method"] == PLAIN)
        for row in group:
            missed = target_missed(row, plain)
            met = "" if row["method"] == PLAIN else f"no: {', '.join(missed)}" if missed else "yes"
            lines.append(f"| {row['method']} | {row['seconds']:.1f} | {row['ratio']:.2f} | {row['target']:g} | {met} "
                         f"| {row[score]:.4f} | {row['test_ll']:.4f} | {row['check']} |")
        shown.extend(group)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n\nRuns:\n\n" + "\n".join(run_lines(shown)) + "\n"


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", default="mlp", help="an architecture with command-line flags (mlp, cnn)")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--uci-dir", type=Path, help="read --dataset from the UCI benchmark (split --split)")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=CSV, help="the CSV the rows are merged into")
    parser.add_argument("--device", default="cpu", help="where the plain training and every fit compute: cpu, cuda or "
                                                        "auto (the rows' machine names the GPU where one was used)")
    args = parser.parse_args(argv)
    device = resolved_device(device_option("--device", args.device))
    methods = [name for name in args.methods.split(",") if name]
    for name in methods:
        METHODS.get(name)
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=args.split, seed=args.seed)
    architecture = "mlp" if args.uci_dir is not None else args.model
    model = build_network(dataset, architecture, args.uci_dir)
    header = run_header("benchmarks.training_cost", argv)
    with fit_threads(), computing_on(device):  # the threads and device every fit computes on: like with like
        plain, plain_seconds = plain_training(model, dataset, args.seed, device)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    rows = [cost_row(dataset, architecture, PLAIN, plain, plain_seconds, plain_seconds, header)]
    table = _written(rows, args.csv)
    for name in methods:
        began = time.perf_counter()
        network = last_layer_network(model, args.seed) if name == "nuts" else model
        posterior = fit(network, dataset, name, seed=args.seed, progress=False, device=args.device)
        rows.append(cost_row(dataset, architecture, name, posterior, time.perf_counter() - began, plain_seconds,
                             header))
        table = _written(rows, args.csv)
    return table


def _written(rows: list[dict[str, Any]], path: Path) -> pd.DataFrame:
    """Print the last row's line and merge the run's rows so far into the CSV at ``path`` (replaced whole, so that a
    run stopped halfway keeps the fits it finished; a rerun's rows replace those of the same data set, model and
    method)."""
    print(cost_line(rows[-1]), flush=True)
    table = merged_rows(rows, COLUMNS, path, ("dataset", "model", "method"))
    with atomic_file(path) as handle:
        table.to_csv(handle, index=False)
    return table


if __name__ == "__main__":
    main()
