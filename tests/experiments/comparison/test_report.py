from __future__ import annotations

import pandas as pd
import pytest
import torch
from bnn.datasets import load_dataset, load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.reliability import fit_warnings
from bnn.inference.evaluation.shift_sets import shift_split
from bnn.models import BayesianMLP

from bnn.cli.main import main
from bnn.experiments.comparison.report import markdown_table, slug, write_comparison
from bnn.runtime.atomic import MARKER


@pytest.mark.long
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # 10 + 10 draws need not converge
def test_compare_command_writes_the_report_of_all_three_methods(tmp_path):
    out = tmp_path / "report"
    argv = ["compare", "--dataset", "toy1d", "--methods", "svi,nuts,laplace", "--hidden", "4", "--steps", "20",
            "--num-warmup", "10", "--num-samples", "10", "--num-chains", "2", "--chain-method", "sequential",
            "--map-steps", "50", "--out", str(out), "--quiet"]
    main(argv)
    fits = ["svi-meanfield", "nuts", "laplace"]
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "comparison.csv", "ranking.csv", "predictive.png", "overlay.png", "forest.png", "marginals.png", MARKER,
            "std_vs_error.png", "pit.png", "selective.png", *(f"trace-{fit}.png" for fit in fits),
            *(f"posterior-{fit}.nc" for fit in fits)} == names
    report = (out / "report.md").read_text()
    assert f"Command: `bnn {' '.join(argv)}`" in report
    for png in (p for p in names if p.endswith(".png")):
        assert f"]({png})" in report
    assert "pyro-ppl 1.9.2" in report and "nutpie 0.16.8" in report and "arviz 0.23.4" in report
    assert f"torch's CPU kernels {torch.backends.cpu.get_cpu_capability()}" in report
    table = pd.read_csv(out / "comparison.csv", index_col=0)
    assert list(table.index) == ["svi (meanfield)", "nuts", "laplace"]
    assert set(pd.read_csv(out / "ranking.csv", index_col=0).index) == set(table.index)
    assert ("**Warning: nuts did not converge**" in report) == (not table.loc["nuts", "converged"])
    assert "| waic_se |" in report and "| converged |" in report
    assert "## Calibration and selective prediction" in report and "| crps | pit_calibration_error | aurc |" in report


def test_an_existing_report_folder_is_refused_before_any_fit(tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for overwrite in ([], ["--overwrite"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["compare", "--methods", "svi", "--steps", "100000", "--out", str(out), "--quiet", *overwrite])
        assert exit_info.value.code == 2
        assert f"{out} holds files this tool did not write (notes.txt, ...)" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_options_that_no_method_takes_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--methods", "svi", "--num-warmup", "10", "--out", str(tmp_path / "r"), "--quiet"])
    assert exit_info.value.code == 2
    assert "apply to none of the methods ['svi']" in capsys.readouterr().err


def test_markdown_table_and_slugs():
    frame = pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x", None]}, index=["svi (meanfield)", "nuts"])
    assert markdown_table(frame).splitlines() == ["|  | a | b |", "|---|---|---|", "| svi (meanfield) | 1.235 | x |",
                                                  "| nuts |  |  |"]
    assert slug("svi (meanfield) #2") == "svi-meanfield-2"


@pytest.mark.long
def test_each_fits_own_warnings_reach_the_report(tmp_path):
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    with pytest.warns(RuntimeWarning, match="the MAP polish .* stopped"):
        laplace = fit(model, data, "laplace", map_steps=1, map_max_iter=1, num_samples=10, progress=False)
    svi = fit(model, data, "svi", steps=5, num_samples=10, progress=False)
    assert fit_warnings({"svi": svi}) == []
    [line] = fit_warnings({"svi": svi, "laplace": laplace})
    assert line.startswith("**Warning: laplace**: the MAP did not converge (gradient norm ")
    write_comparison({"svi": svi, "laplace": laplace}, data, tmp_path / "report", command="test")
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.startswith("# svi, laplace on toy1d") and line in report


# one point estimate (through the time budget's path) and two
@pytest.mark.parametrize("methods, extra", [("map,map", []), ("map", ["--time-budget", "99999h"])])
def test_point_estimates_alone_give_a_report_that_says_there_is_no_ranking(methods, extra, tmp_path):
    out = tmp_path / "report"
    main(["compare", "--dataset", "toy1d", "--methods", methods, "--hidden", "4", "--map-steps", "50",
          "--out", str(out), "--quiet", *extra])
    report = (out / "report.md").read_text()
    assert "No ranking: PSIS-LOO needs posterior draws" in report
    assert pd.read_csv(out / "ranking.csv", index_col=0).empty
    assert len(pd.read_csv(out / "comparison.csv", index_col=0)) == len(methods.split(","))


def test_a_shift_set_gives_the_out_of_distribution_table_and_the_verdict_against_map(tmp_path):
    out = tmp_path / "report"
    main(["compare", "--dataset", "toy1d", "--methods", "map,laplace", "--hidden", "4", "--map-steps", "200",
          "--num-samples", "50", "--ood", "gap", "--out", str(out), "--quiet"])
    report = (out / "report.md").read_text()
    ood = pd.read_csv(out / "ood.csv", index_col=[0, 1])
    assert set(ood.index) == {(fit, u) for fit in ("map", "laplace") for u in ("std", "epistemic_std")}
    assert ood.loc[("map", "epistemic_std"), "auroc"] == 0.5  # a point estimate has no epistemic part
    assert "## Out-of-distribution detection: gap" in report and "| map: epistemic_std | 0.5 | 0.5 | 1 |" in report
    assert "laplace beats the MAP network" in report or "laplace does not beat the MAP network" in report


def test_held_out_classes_fits_without_them_and_scores_them_as_the_shift(tmp_path):
    out = tmp_path / "report"
    main(["compare", "--dataset", "digits", "--model", "mlp", "--methods", "map,laplace", "--hidden", "4",
          "--map-steps", "100", "--map-max-iter", "10", "--no-tune-prior-precision", "--num-samples", "30",
          "--ood", "held-out-classes", "--out", str(out), "--quiet"])
    report = (out / "report.md").read_text()
    assert report.startswith("# map, laplace on digits without classes 8, 9")
    assert "## Out-of-distribution detection: held-out-classes" in report
    assert "289 in-distribution and 71 shifted inputs (shift set `held-out-classes`)" in report
    ood = pd.read_csv(out / "ood.csv", index_col=[0, 1])
    assert set(ood.index) == {(fit, u) for fit in ("map", "laplace") for u in ("entropy", "mutual_information")}
    assert ood.loc[("map", "mutual_information"), "auroc"] == 0.5
    assert "BayesianMLP(64-4-8" in report  # eight outputs: the held-out classes are not in the data


def test_conformal_holds_rows_out_of_every_fit_and_sets_its_sets_beside_the_credible_ones(tmp_path):
    out = tmp_path / "report"
    main(["compare", "--dataset", "toy1d", "--methods", "map,laplace", "--hidden", "4", "--map-steps", "200",
          "--num-samples", "50", "--conformal", "0.2", "--ood", "farthest", "--out", str(out), "--quiet"])
    report = (out / "report.md").read_text()
    assert "80 training and 100 test examples" in report and "## Credible and conformal 90% sets" in report
    assert "calibrated on 20 training rows held out of every fit" in report
    table = pd.read_csv(out / "comparison.csv", index_col=0)
    for column in ("credible_coverage", "conformal_coverage", "credible_width", "conformal_width", "crps",
                   "ood_auroc_total", "ood_auroc_epistemic"):
        assert table[column].between(0, float("inf")).all(), column
    assert table.loc["map", "ood_auroc_epistemic"] == 0.5
    # the farthest fifth is drawn against the 80 rows fitted, not the 100 of the training split
    assert "80 in-distribution and 20 shifted inputs" in report


@pytest.mark.parametrize("share, message", [
    ("1.5", "the calibration share must lie in (0, 1) and leave rows on both sides; 1.5 of toy1d's 100 training rows"),
    ("0.05", "coverage 1 - alpha = 0.9 needs at least 9 calibration points, got 5"),
])
def test_a_calibration_share_that_cannot_serve_is_refused_before_any_fit(share, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--dataset", "toy1d", "--methods", "svi", "--steps", "100000", "--conformal", share,
              "--out", str(tmp_path / "r"), "--quiet"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_write_comparison_refuses_a_shift_set_of_another_data_set(tmp_path):
    digits = load_dataset("digits")
    split = shift_split(digits, "held-out-classes")
    with pytest.raises(ValueError, match="shift set 'held-out-classes' belongs to data set 'digits without classes 8, 9', "
                       "not to the 'digits' given: pass the split's dataset"):
        write_comparison({}, digits, tmp_path / "r", command="c", ood=split)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("dataset, shift, message", [
    ("diabetes", "gap", "shift set 'gap' is defined for toy1d, whose inputs have a gap; diabetes has none"),
    ("toy1d", "noise", "shift set 'noise' transforms images and toy1d is tabular"),
    ("toy1d", "blur", "argument --ood: invalid choice: 'blur'"),
])
def test_a_shift_set_the_data_lack_is_refused_before_any_fit(dataset, shift, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--dataset", dataset, "--methods", "svi", "--steps", "100000", "--ood", shift,
              "--out", str(tmp_path / "r"), "--quiet"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
