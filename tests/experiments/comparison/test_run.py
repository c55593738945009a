"""The comparison as a function: ``run_comparison`` from Python does what ``bnn compare`` does (the command line only
parses and calls it), and every refusal it can know comes before its first fit."""

from __future__ import annotations

import pytest
from bnn.datasets import load_toy1d
from bnn.models import BayesianMLP, from_module
from torch import nn

from bnn.experiments.comparison import run as workflow
from bnn.experiments.comparison.run import MethodSpec, method_specs, run_comparison

QUICK = {"steps": 30, "map_steps": 30, "num_samples": 20}


def tiny_mlp(prior="gaussian"):
    return BayesianMLP(1, 1, hidden=(3,), prior=prior, likelihood={"name": "gaussian", "scale": None})


def no_fit(*args, **kwargs):
    pytest.fail("a fit started before a refusal the comparison could know")


def test_a_comparison_from_python_writes_the_report_and_returns_the_table(tmp_path, capsys):
    data = load_toy1d(n_train=40, n_test=20)
    table = run_comparison(data, ["svi", "laplace"], model=tiny_mlp(), out=tmp_path / "report", options=QUICK,
                           time_budget="10m", progress=False)
    assert list(table.index) == ["svi (meanfield)", "laplace"] and (tmp_path / "report" / "report.md").is_file()
    assert "within --time-budget 10.0 min" in capsys.readouterr().out  # each fit's estimate, said before it
    assert table.attrs["report_seconds"] > 0 and not (tmp_path / "report.partial-fits").exists()


def test_a_model_can_be_built_for_the_data_the_fits_learn_from(tmp_path):
    data = load_toy1d(n_train=40, n_test=20)
    built = []

    def build(dataset):
        built.append(dataset.x_train.shape[0])
        return tiny_mlp()

    run_comparison(data, "laplace", model=build, out=tmp_path / "report", options={"map_steps": 30}, conformal=0.25,
                   progress=False)
    assert built == [30]  # a quarter of the training rows calibrates the conformal sets, the rest fits


@pytest.mark.parametrize("methods, model, message", [
    ("svi,laplace", tiny_mlp("horseshoe"), r"method 'laplace' cannot fit the hierarchical prior\(s\) 'horseshoe'"),
    ("svi,mc-dropout", from_module(nn.Sequential(nn.Linear(1, 3), nn.Tanh(), nn.Linear(3, 1))),
     r"method 'mc-dropout' needs a network that says where its dropout goes"),
    ("svi,nuts", tiny_mlp(), r"method 'nuts' takes no option\(s\) \['stepz'\]"),
    ("svi,svi:nope", tiny_mlp(), r"unknown guide 'nope'"),
], ids=["horseshoe and laplace", "a module and mc-dropout", "an unknown option", "an unknown guide"])
def test_every_refusal_it_can_know_comes_before_the_first_fit(tmp_path, monkeypatch, methods, model, message):
    monkeypatch.setattr(workflow, "fit", no_fit)
    options = {"stepz": 3} if "nuts" in methods else {}
    if "stepz" in options:  # an option no chosen method takes is refused as such; one that svi does not take either
        message = r"option\(s\) \['stepz'\] apply to none of the methods"
    with pytest.raises(ValueError, match=message):
        run_comparison(load_toy1d(n_train=40, n_test=20), methods, model=model, out=tmp_path / "report",
                       options=options, progress=False)
    assert not (tmp_path / "report").exists()


def test_methods_are_named_as_on_the_command_line_or_as_specs():
    assert method_specs("svi,svi:meanfield, nuts") == [MethodSpec("svi"), MethodSpec("svi", "meanfield"),
                                                       MethodSpec("nuts")]
    assert method_specs(["laplace", MethodSpec("svi", "autonormal")]) == [MethodSpec("laplace"),
                                                                        MethodSpec("svi", "autonormal")]
    with pytest.raises(ValueError, match="a comparison needs at least one method, for example svi,nuts,laplace"):
        method_specs(" , ")
    with pytest.raises(ValueError, match="unknown method 'bogus'"):
        method_specs("bogus")
