"""The cost benchmark: a plain training, then each method at its defaults on the same data, a line and a CSV row per
fit, and the tables made from the CSV."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from bnn.datasets import load_dataset
from bnn.inference.core.chain_record import ChainRecord
from bnn.inference.core.record import FitRecord
from bnn.inference.diagnostics.convergence import ChainDiagnostics
from torch.func import functional_call

from benchmarks import training_cost
from tests.support.interrupts import interrupt_fit_of

pytestmark = pytest.mark.benchmarks


def test_prints_and_keeps_a_row_per_fit_the_plain_training_first(tmp_path, capsys):
    csv = tmp_path / "results.csv"
    training_cost.main(["--dataset", "toy1d", "--methods", "map", "--csv", str(csv)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cost ")]
    assert [line.split()[1] for line in lines] == ["method=plain", "method=map"]
    frame = pd.read_csv(csv)
    assert list(frame["method"]) == ["plain", "map"]
    plain_seconds = frame["seconds"].iloc[0]
    assert (frame["ratio"] - frame["seconds"] / plain_seconds).abs().max() < 1e-9
    assert list(frame["target"]) == [1.0, training_cost.TARGETS["map"]]
    assert frame["rmse"].notna().all() and frame["accuracy"].isna().all()
    assert frame["command"].str.startswith("python -m benchmarks.training_cost").all()
    tables = training_cost.tables_from_csv(csv)
    assert "| method | seconds | ratio | target | met | rmse | test_ll | check |" in tables
    assert tables.count("\n| map | ") == 1 and "Runs:" in tables


def test_a_run_stopped_halfway_keeps_the_fits_it_finished(tmp_path, monkeypatch):
    csv = tmp_path / "results.csv"
    interrupt_fit_of(monkeypatch, training_cost, "laplace")
    with pytest.raises(KeyboardInterrupt):
        training_cost.main(["--dataset", "toy1d", "--methods", "map,laplace", "--csv", str(csv)])
    assert list(pd.read_csv(csv)["method"]) == ["plain", "map"]


def test_the_plain_training_computes_on_the_threads_a_fit_does(tmp_path, monkeypatch, two_threads_by_default):
    """With torch at two threads by default, the plain training runs on one, as every fit does, so that the ratio
    times both alike."""
    seen, plain_training = [], training_cost.plain_training

    def counted(*args):
        seen.append(torch.get_num_threads())
        return plain_training(*args)

    monkeypatch.setattr(training_cost, "plain_training", counted)
    training_cost.main(["--dataset", "toy1d", "--methods", "", "--csv", str(tmp_path / "results.csv")])
    assert seen == [1] and torch.get_num_threads() == 2


def test_without_a_gpu_device_cuda_is_refused_before_the_plain_training(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(training_cost, "plain_training", lambda *args: pytest.fail("the plain training ran"))
    with pytest.raises(ValueError, match=r"--device='cuda', and torch sees no CUDA device here"):
        training_cost.main(["--dataset", "toy1d", "--device", "cuda", "--csv", str(tmp_path / "results.csv")])


@pytest.mark.gpu
def test_the_digits_rows_on_a_gpu(tmp_path):
    """The digits MLP's rows with the plain training and every scaling method on the GPU: a row each, a finite test
    log-likelihood, the GPU named in the run's machine."""
    csv = tmp_path / "results.csv"
    training_cost.main(["--dataset", "digits", "--model", "mlp", "--device", "cuda", "--csv", str(csv)])
    frame = pd.read_csv(csv)
    assert list(frame["method"]) == [training_cost.PLAIN, *training_cost.DEFAULT_METHODS]
    assert frame["test_ll"].notna().all() and (frame["test_ll"] < 0).all()
    assert frame["machine"].str.contains(torch.cuda.get_device_name(), regex=False).all()


def test_the_readmes_cost_column_is_each_methods_ratio_on_the_digits_cnn():
    """The README's methods table gives each method's cost as its ratio to the plain training of the digits CNN, from
    the committed CSV (NUTS and SVGD, full-batch samplers of all of that network's weights, are not run there: each
    would take hours)."""
    readme = (training_cost.RESULTS.parents[2] / "README.md").read_text()
    table = readme[readme.index("| `method=` | what it is"):].split("\n\n", 1)[0].splitlines()
    assert table[0].endswith("| cost on the digits CNN |")
    frame = pd.read_csv(training_cost.CSV)
    ratios = frame[(frame["dataset"] == "digits") & (frame["model"] == "cnn")].set_index("method")["ratio"]
    for row in table[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        methods = [name.strip("` ") for name in cells[0].split(",")]
        expected = "not run" if methods in (["nuts"], ["svgd"]) else ", ".join(f"{ratios[name]:.1f}x" for name in methods)
        assert cells[-1] == expected, methods


@pytest.mark.parametrize("dataset, architecture", [("digits", "cnn"), ("mnist1d", "cnn"), ("digits", "mlp")])
def test_the_torch_twin_computes_the_built_in_network(dataset, architecture):
    """``--methods nuts`` fits the network as a torch module (Bayesian in its last layer): at the same weights the
    module's output is the built-in network's, and its last nn.Linear holds the last layer's sites."""
    model = training_cost.build_network(load_dataset(dataset), architecture, None)
    module = training_cost.torch_twin(model)
    parameters = dict(module.named_parameters())
    assert [value.shape for value in parameters.values()] == [site.shape for site in model.sites]
    weights = {site.name: torch.randn(site.shape, generator=torch.Generator().manual_seed(k))
               for k, site in enumerate(model.sites)}
    x = torch.randn(7, model.in_features)
    outputs = functional_call(module, dict(zip(parameters, weights.values())), (x,))
    torch.testing.assert_close(outputs, model.forward(x, weights))
    assert [site.name for site in training_cost.last_layer_network(model, 0).sites] == list(parameters)[-2:]


def test_the_plain_training_returns_its_best_epochs_weights():
    """The digits MLP stops early: the weights returned are those of the best epoch (their validation loss is the
    record's), not the last epoch's."""
    dataset = load_dataset("digits")
    model = training_cost.build_network(dataset, "mlp", None)
    posterior, _ = training_cost.plain_training(model, dataset, seed=0)
    record = posterior.record
    assert record.best_epoch == record.epochs - training_cost.RECIPE["patience"]
    targets = model.likelihood.check_targets(dataset.y_train, model.out_features)
    (x_val, y_val), _ = training_cost.held_out(dataset.x_train, targets, torch.Generator().manual_seed(0))
    weights = {name: value[0, 0] for name, value in posterior.samples.items()}
    loss = -model.likelihood.distribution(model.forward(x_val, weights), {}).log_prob(y_val).mean()
    assert loss.item() == pytest.approx(record.validation_loss, rel=1e-6)


def test_the_check_says_what_failed_a_markov_chains_diagnostics_included():
    def posterior(record):
        return SimpleNamespace(record=record)

    diagnostics = dict(r_hat_max=1.5, ess_bulk_min=50.0, ess_tail_min=50.0, divergences=0, ess_predictive_min=900.0,
                       num_chains=2)
    disagreeing = ChainDiagnostics(r_hat_predictive=1.2, converged=False, **diagnostics)
    agreeing = ChainDiagnostics(r_hat_predictive=1.001, converged=True, **diagnostics)
    said = training_cost.check(posterior(ChainRecord(seed=0, train_seconds=1.0, diagnostics=disagreeing)))
    assert said == disagreeing.problems()[0] and "predictive R-hat" in said and "1.200 > 1.01" in said
    assert training_cost.check(posterior(ChainRecord(seed=0, train_seconds=1.0, diagnostics=agreeing))) == "passed"
    assert training_cost.check(posterior(FitRecord(seed=0, train_seconds=1.0))) == "no check"


def test_a_fit_meets_its_target_only_with_its_time_its_check_its_test_ll_and_its_accuracy():
    plain = {"method": "plain", "ratio": 1.0, "target": 1.0, "check": "passed", "test_ll": -0.30, "accuracy": 0.90}
    met = {"method": "map", "ratio": 1.4, "target": 1.5, "check": "passed", "test_ll": -0.25, "accuracy": 0.895}
    assert training_cost.target_missed(met, plain) == []  # half a point below the plain accuracy is within the target
    assert training_cost.target_missed({**met, "ratio": 1.6}, plain) == ["time"]
    assert training_cost.target_missed({**met, "check": "no check"}, plain) == ["check"]
    missed = {**met, "check": "the chains disagree", "test_ll": -0.31, "accuracy": 0.88}
    assert training_cost.target_missed(missed, plain) == ["check", "test LL", "accuracy"]
    regression = {**met, "accuracy": float("nan")}
    assert training_cost.target_missed(regression, {**plain, "accuracy": float("nan")}) == []


def test_the_tables_met_column_names_what_a_fit_missed(tmp_path):
    csv = tmp_path / "results.csv"
    header = {"command": "c", "commit": "abc1234", "machine": "m", "date": "2026-12-07", "rmse": float("nan")}
    rows = [{"dataset": "d", "model": "cnn", "method": "plain", "seconds": 10.0, "ratio": 1.0, "target": 1.0,
             "accuracy": 0.9, "test_ll": -0.3, "check": "passed", **header},
            {"dataset": "d", "model": "cnn", "method": "sgld", "seconds": 20.0, "ratio": 2.0, "target": 3.0,
             "accuracy": 0.95, "test_ll": -0.2, "check": "the chains disagree", **header},
            {"dataset": "d", "model": "cnn", "method": "map", "seconds": 12.0, "ratio": 1.2, "target": 1.5,
             "accuracy": 0.95, "test_ll": -0.2, "check": "passed", **header}]
    pd.DataFrame(rows, columns=training_cost.COLUMNS).to_csv(csv, index=False)
    tables = training_cost.tables_from_csv(csv)
    assert "| sgld | 20.0 | 2.00 | 3 | no: check | 0.9500 |" in tables
    assert "| map | 12.0 | 1.20 | 1.5 | yes | 0.9500 |" in tables
    assert "| plain | 10.0 | 1.00 | 1 |  | 0.9000 |" in tables
