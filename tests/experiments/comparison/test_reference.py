"""``compare --reference``: each fit's distance from a trusted fit of the comparison, or from a saved one, in the
table and a section of the report; a reference that cannot be one is refused before any fit where that is known."""

from __future__ import annotations

import pytest
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.models import BayesianMLP

from bnn.experiments.comparison import run as workflow
from bnn.experiments.comparison.run import run_comparison

DATA = load_toy1d(n_train=40, n_test=20)
NUTS = {"num_chains": 4, "num_warmup": 100, "num_samples": 200, "chain_method": "sequential", "map_steps": 30}


def tiny_mlp(hidden=(3,)):
    return BayesianMLP(1, 1, hidden=hidden, likelihood={"name": "gaussian", "scale": 0.3})


def no_fit(*args, **kwargs):
    pytest.fail("a fit started before a refusal the comparison could know")


def test_each_fit_is_measured_against_the_named_reference_in_the_table_and_the_report(tmp_path):
    table = run_comparison(DATA, "nuts,laplace", model=tiny_mlp(), out=tmp_path / "report", options=NUTS,
                           reference="nuts", progress=False)
    assert table.loc["laplace", "wasserstein"] > 0 and table.loc["laplace", "wasserstein_se"] > 0
    assert table.loc["laplace", "std_ratio"] > 0 and table["wasserstein"].isna()["nuts"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Distance from the reference (nuts)" in report and "| laplace |" in report.split("## Distance")[1]


def test_a_named_reference_that_fails_its_own_check_leaves_a_warning_and_the_rest_of_the_report(tmp_path):
    # SVI's one chain of 50 independent draws: no R-hat, and a bulk ESS of f(x) of about 50
    table = run_comparison(DATA, "svi,laplace", model=tiny_mlp(), out=tmp_path / "report",
                           options={"steps": 30, "num_samples": 50, "map_steps": 30}, reference="svi", progress=False)
    assert "wasserstein" not in table.columns
    [warning] = [line for line in table.attrs["warnings"] if "no distances" in line]
    assert ("refused as a reference: the split R-hat of f(x) cannot be computed from 1 chain(s) of 50 draws (it needs "
            "two chains or more); the bulk ESS of f(x) falls to") in warning
    assert warning in (tmp_path / "report" / "report.md").read_text()


def test_a_reference_that_names_no_single_method_is_refused_before_any_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(workflow, "fit", no_fit)
    with pytest.raises(ValueError, match=r"--reference 'nuts' names no fit of this comparison \(svi, laplace\)"):
        run_comparison(DATA, "svi,laplace", model=tiny_mlp(), out=tmp_path / "report", reference="nuts", progress=False)
    with pytest.raises(ValueError, match=r"--reference 'svi' names 2 fits"):
        run_comparison(DATA, "svi,svi:autonormal", model=tiny_mlp(), out=tmp_path / "report", reference="svi",
                       progress=False)


def test_a_saved_reference_of_another_network_or_failing_its_check_is_refused_before_any_fit(tmp_path, monkeypatch):
    fit(tiny_mlp(hidden=(4,)), DATA, "map", map_steps=30, progress=False).save(tmp_path / "wider")
    fit(tiny_mlp(), DATA, "map", map_steps=30, progress=False).save(tmp_path / "point")
    monkeypatch.setattr(workflow, "fit", no_fit)
    with pytest.raises(ValueError, match=r"the reference in .*wider is a fit of another network"):
        run_comparison(DATA, "laplace", model=tiny_mlp(), out=tmp_path / "report", reference=tmp_path / "wider",
                       progress=False)
    refused = r"the map posterior in .*point is refused as a reference: the split R-hat of f\(x\) cannot be computed from 1"
    with pytest.raises(ValueError, match=refused):
        run_comparison(DATA, "laplace", model=tiny_mlp(), out=tmp_path / "report", reference=str(tmp_path / "point"),
                       progress=False)
