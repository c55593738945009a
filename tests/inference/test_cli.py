from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inference.cli import main, options_per_method


def test_fit_writes_the_three_files(tmp_path):
    out = tmp_path / "run"
    main(["fit", "--dataset", "toy1d", "--prior", "gaussian", "--guide", "autonormal", "--method", "svi",
          "--hidden", "8,8", "--steps", "30", "--num-draws", "50", "--out", str(out), "--quiet"])
    assert {p.name for p in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "predictive.png"}
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("dataset", "method", "guide", "prior", "seed", "train_seconds", "test_rmse", "test_ll"):
        assert key in metrics
    assert metrics["guide"] == "autonormal" and metrics["dataset"] == "toy1d"
    assert (out / "predictive.png").read_bytes()[:4] == b"\x89PNG"


def test_classification_and_prior_options(tmp_path):
    out = tmp_path / "bc"
    main(["fit", "--dataset", "breast_cancer", "--prior", "scale-mixture", "--prior-option", "pi=0.25",
          "--hidden", "4", "--steps", "20", "--batch-size", "91", "--num-draws", "20", "--out", str(out), "--quiet"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert "test_accuracy" in metrics and "roc_auc" in metrics
    assert json.loads((out / "fit.json").read_text())["model"]["prior"]["*"]["pi"] == 0.25


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--prior", "cauchy"], "invalid choice: 'cauchy'"),
        (["--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["--prior-option", "scale=-1"], "scale must be a positive finite number"),
        (["--hidden", "5,x"], "comma-separated widths"),
        (["--noise", "0"], "scale must be a positive"),
        (["--steps", "5", "--epochs", "2"], "give steps or epochs, not both"),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--out", str(tmp_path / "x"), "--quiet", *arguments])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_module_entry_point_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "inference", "fit", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--prior {gaussian,laplace,scale-mixture}" in result.stdout


def test_compare_budget_reaches_only_its_methods_and_yields_to_given_options():
    specs = [("svi", None), ("nuts", None), ("laplace", None)]
    svi, nuts, laplace = options_per_method(specs, {})
    assert svi == {"jit": True} and nuts == {"max_tree_depth": 8} and laplace == {}
    svi, nuts, laplace = options_per_method(specs, {"max_tree_depth": 10, "jit": False, "seed": 3})
    assert svi == {"jit": False, "seed": 3} and nuts == {"max_tree_depth": 10, "seed": 3} and laplace == {"seed": 3}
    assert options_per_method([("laplace", None)], {}) == [{}]  # a budget of absent methods is no unused option
