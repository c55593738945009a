from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from bnn.inference import Posterior
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE

from bnn.cli import compare as compare_command
from bnn.cli.arguments import fit_options
from bnn.cli.main import build_parser, main
from bnn.experiments.comparison.run import method_specs, options_per_method
from bnn.runtime.atomic import MARKER
from tests.support.interrupts import signal_at_step

RESULT_FILES = {"metrics.json", "posterior.nc", "fit.json", "predictive.png", MARKER}


@pytest.mark.long
def test_fit_writes_the_three_files_and_records_its_own_command(tmp_path):
    out = tmp_path / "a run"  # a space: the recorded command must quote it
    argv = ["fit", "--dataset", "toy1d", "--prior", "gaussian", "--guide", "autonormal", "--method", "svi",
            "--hidden", "8,8", "--steps", "30", "--num-samples", "50", "--out", str(out), "--quiet"]
    main(argv)
    assert {p.name for p in out.iterdir()} == RESULT_FILES
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("dataset", "method", "guide", "prior", "seed", "train_seconds", "test_rmse", "test_ll", "final_elbo"):
        assert key in metrics
    assert metrics["guide"] == "autonormal" and metrics["dataset"] == "toy1d"
    assert metrics["command"] == f"bnn fit --dataset toy1d --prior gaussian --guide autonormal --method svi " \
                                 f"--hidden 8,8 --steps 30 --num-samples 50 --out '{out}' --quiet"
    assert shlex.split(metrics["command"])[1:] == argv
    assert (out / "predictive.png").read_bytes()[:4] == b"\x89PNG"


def test_classification_and_prior_options(tmp_path):
    out = tmp_path / "bc"
    main(["fit", "--dataset", "breast_cancer", "--prior", "scale-mixture", "--prior-option", "pi=0.25",
          "--hidden", "4", "--steps", "20", "--batch-size", "91", "--num-samples", "20", "--out", str(out), "--quiet"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert "test_accuracy" in metrics and "roc_auc" in metrics
    assert json.loads((out / "fit.json").read_text())["model"]["prior"]["*"]["pi"] == 0.25


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--prior", "cauchy"], "invalid choice: 'cauchy'"),
        (["--dataset", "mnist"], "unknown dataset 'mnist'; choose a built-in one from ['breast_cancer', 'diabetes', "
                                 "'digits', 'mnist1d', 'mnist1d-40k', 'toy1d']"),
        (["--split", "2"], "--split 2 picks a split of a UCI data set; pass --uci-dir too"),
        (["--method", "nuts", "--dense-mass", "--engine", "nutpie"], "the nutpie engine has no dense mass matrix"),
        (["--prior-option", "scale=-1"], "scale must be a positive finite number"),
        (["--hidden", "5,x"], "comma-separated widths"),
        (["--noise", "0"], "scale must be a positive"),
        (["--steps", "5", "--epochs", "2"], "give steps or epochs, not both"),
        (["--hidden", ""], "comma-separated widths like 50,50 with no empty one, got ''; write --hidden none"),
        (["--hidden", "5,,5"], "with no empty one, got '5,,5'"),
        (["--hidden", "4000000000"], "method 'svi' needs at least"),
        (["--hidden", "99999999999999999999"], "more than a tensor can index"),
        (["--method", "nuts", "--max-tree-depth", "1000"], "max_tree_depth must be an integer >= 1 and <= 20, got 1000"),
        (["--method", "nuts", "--max-tree-depth", "0"], "max_tree_depth must be an integer >= 1"),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--out", str(tmp_path / "x"), "--quiet", *arguments])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_hidden_none_asks_for_a_network_without_hidden_layers():
    arguments = build_parser().parse_args(["fit", "--out", "x", "--hidden", "none"])
    assert arguments.hidden == ()


@pytest.mark.subprocess
def test_module_entry_point_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bnn", "fit", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--prior {ard,gaussian,horseshoe,laplace,layer-scale,scale-mixture}" in result.stdout


def test_compare_budget_reaches_only_its_methods_and_yields_to_given_options():
    specs = method_specs("svi,nuts,laplace")
    svi, nuts, laplace = options_per_method(specs, {})
    assert svi == {"steps": 15000} and nuts == {} and laplace == {}
    svi, nuts, laplace = options_per_method(specs, {"max_tree_depth": 8, "jit": False, "steps": 50, "seed": 3})
    assert svi == {"jit": False, "steps": 50, "seed": 3} and nuts == {"max_tree_depth": 8, "seed": 3} and laplace == {"seed": 3}
    assert options_per_method(method_specs("laplace"), {}) == [{}]  # a budget of absent methods is no unused option


@pytest.mark.long
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # 5 + 5 draws: one chain
def test_nuts_options_reach_the_sampler(tmp_path):
    out = tmp_path / "nuts"
    main(["fit", "--method", "nuts", "--engine", "pyro", "--dense-mass", "--chain-method", "sequential",
          "--num-warmup", "5", "--num-samples", "5", "--num-chains", "1", "--hidden", "2", "--quiet", "--out", str(out)])
    assert {p.name for p in out.iterdir()} == RESULT_FILES
    info = json.loads((out / "fit.json").read_text())["record"]
    assert (info["options"]["engine"], info["options"]["dense_mass"], info["chain_method"]) == ("pyro", True, "sequential")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["engine"] == "pyro" and metrics["converged"] is info["diagnostics"]["converged"]


def test_no_jit_turns_off_the_compare_default():
    arguments = build_parser().parse_args(["compare", "--no-jit", "--no-dense-mass"])
    options = fit_options(arguments)
    assert options["jit"] is False and options["dense_mass"] is False
    svi, nuts = options_per_method(method_specs("svi,nuts"), options)
    assert svi["jit"] is False and nuts["dense_mass"] is False
    assert "jit" not in fit_options(build_parser().parse_args(["compare"]))


@pytest.mark.long
def test_ctrl_c_keeps_a_checkpoint_by_default_and_says_how_to_resume(monkeypatch, tmp_path, capsys):
    out = tmp_path / "run"
    arguments = ["fit", "--dataset", "toy1d", "--hidden", "3", "--steps", "40", "--num-samples", "5", "--quiet",
                 "--out", str(out)]
    signal_at_step(monkeypatch, 7)  # Ctrl-C during the 7th step
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)  # no --checkpoint-every: the default checkpoints still keep the work
    monkeypatch.undo()
    assert exit_info.value.code == 130
    message = capsys.readouterr().err
    assert message.startswith("interrupted: SVI stopped by SIGINT after step 7 of 40") and message.count("\n") == 1
    assert f"--resume {out / 'checkpoint'}" in message
    assert {p.name for p in out.iterdir()} == {"checkpoint", MARKER} and (out / "checkpoint" / CHECKPOINT_FILE).is_file()
    main([*arguments, "--resume", str(out / "checkpoint")])
    assert {p.name for p in out.iterdir()} == RESULT_FILES and Posterior.load(out).record.resumed_from_step == 7


def test_ctrl_c_before_any_work_says_nothing_was_kept(monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare_command, "load_dataset", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--out", str(tmp_path / "report"), "--quiet"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == f"interrupted: nothing was kept; {tmp_path / 'report'} is as it was before the command\n"


@pytest.mark.filterwarnings("ignore:Encountered NaN:UserWarning")  # pyro on the NaN this test provokes
def test_a_non_finite_elbo_keeps_the_last_finite_posterior_in_the_out_folder(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--dataset", "toy1d", "--hidden", "5", "--noise", "0.1", "--guide", "meanfield", "--lr", "1e10",
              "--steps", "20", "--quiet", "--out", str(out)])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert message.startswith("error: SVI stopped at step 1") and "error.posterior" not in message
    assert f"{out} holds the posterior with the parameters before that step" in message
    assert {p.name for p in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "checkpoint", MARKER}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped"] == "non-finite ELBO at step 1" and "test_rmse" not in metrics
    kept = Posterior.load(out)
    assert kept.record.stopped == "non-finite ELBO at step 1" and kept.record.steps == 1


@pytest.mark.long
def test_laplace_metrics_carry_its_own_diagnostics(tmp_path):
    out = tmp_path / "laplace"
    main(["fit", "--method", "laplace", "--hidden", "2", "--noise", "0.1", "--map-steps", "50", "--num-samples", "20", "--quiet",
          "--out", str(out)])
    metrics = json.loads((out / "metrics.json").read_text())
    info = json.loads((out / "fit.json").read_text())["record"]
    for key in ("map_grad_norm", "map_converged", "log_marginal_likelihood"):
        assert metrics[key] == info[key], key
    assert (metrics["hessian"], metrics["structure"]) == (info["options"]["hessian"], info["structure"])
    assert (metrics["hessian"], metrics["structure"]) == ("ggn", "full")
    assert info["options"]["structure"] is None and info["structure_reason"].startswith("default: the full GGN")


@pytest.mark.long
def test_the_likelihood_option_sizes_the_network_and_refuses_a_noise(tmp_path, capsys):
    out = tmp_path / "het"
    main(["fit", "--likelihood", "heteroscedastic-gaussian", "--hidden", "3", "--steps", "20", "--num-samples", "10",
          "--quiet", "--out", str(out)])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"].startswith("BayesianMLP(1-3-2,") and "HeteroscedasticGaussianLikelihood" in metrics["model"]
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--likelihood", "heteroscedastic-gaussian", "--noise", "0.1", "--out", str(tmp_path / "no")])
    assert exit_info.value.code == 2
    assert "applies to regression data, without --noise" in capsys.readouterr().err
