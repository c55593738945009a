"""The fidelity benchmark runs end to end: the reference fitted, checked and saved, read back on the next run instead
of refitted, a fit's distance from it, a fit refused before any work, a reference that fails its check, the tables."""

from __future__ import annotations

import math
import sys

import arviz as az
import pandas as pd
import pytest
from bnn.datasets import load_dataset
from bnn.inference import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.models import BayesianMLP

from benchmarks import fidelity
from bnn.experiments.comparison import reference as reference_module

pytestmark = pytest.mark.benchmarks

SHORT_CHAINS = {"num_chains": 4, "num_warmup": 10, "init": "prior", "chain_method": "sequential"}


def tiny_network(dataset=None) -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(3,))


@pytest.fixture
def tiny_case(monkeypatch):
    """toy1d on a 1-3-1 network, the reference 4 chains of 10 draws of which half fit in the saved bytes; a fit whose
    options are refused."""
    case = fidelity.Case("toy1d, a 1-3-1 network", lambda uci_dir: load_dataset("toy1d"), tiny_network, draws=10)
    monkeypatch.setitem(fidelity.CASES, "tiny", case)
    monkeypatch.setitem(fidelity.FITS, "short-svi", ("svi", {"steps": 30, "num_samples": 100}))
    monkeypatch.setitem(fidelity.FITS, "refused", ("laplace", {"num_samples": 0}))
    monkeypatch.setattr(fidelity, "REFERENCE_OPTIONS", SHORT_CHAINS)
    weights = sum(math.prod(shape) for shape in tiny_network().latent_shapes.values())
    monkeypatch.setattr(fidelity, "SAVED_BYTES", 4 * weights * 4 * 10 // 2)  # float32: the draws of 4 x 5


def test_a_reference_that_fails_its_check_is_a_row_that_says_why_and_nothing_is_saved(tmp_path, tiny_case):
    with pytest.warns(ConvergenceWarning):
        frame = fidelity.main(["--case", "tiny", "--fits", "short-svi", "--results", str(tmp_path)])
    assert frame["fit"].tolist() == [fidelity.REFERENCE]
    assert frame["check"][0].startswith("refused as a reference: ") and "ESS of f(x) falls to" in frame["check"][0]
    assert not (tmp_path / "tiny" / "reference").exists()


def test_a_run_saves_its_reference_and_the_next_reads_it_back(tmp_path, tiny_case, monkeypatch):
    for module in (fidelity, sys.modules["bnn.inference.evaluation.fidelity"], reference_module):
        monkeypatch.setattr(module, "reference_problems", lambda reference, f: [])  # 40 draws pass as a reference here
    with pytest.warns(ConvergenceWarning):
        first = fidelity.main(["--case", "tiny", "--fits", "short-svi,refused", "--results", str(tmp_path)])
    assert first["fit"].tolist() == [fidelity.REFERENCE, "short-svi", "refused"]
    reference, point, refused = first.to_dict("records")
    assert reference["seconds"] > 0 and math.isnan(reference["wasserstein"])
    assert point["wasserstein"] > 0 and point["wasserstein_se"] >= 0 and point["std_ratio"] > 0
    assert refused["check"].startswith("no posterior: ") and math.isnan(refused["test_ll"])
    assert (tmp_path / "tiny" / "reference" / "fit.json").is_file()

    again = fidelity.main(["--case", "tiny", "--fits", "short-svi", "--results", str(tmp_path)])
    assert again["fit"].tolist() == [fidelity.REFERENCE, "refused", "short-svi"]  # the saved reference's row kept
    assert again["seconds"][0] == pytest.approx(reference["seconds"])
    saved = Posterior.load(tmp_path / "tiny" / "reference")
    assert (saved.num_chains, saved.num_draws) == (4, 5)  # every second draw of the 4 x 10
    assert "log_likelihood" not in az.from_netcdf(str(tmp_path / "tiny" / "reference" / "posterior.nc")).groups()
    # the same fit against half the reference's draws: the same distance within the errors of both estimates
    assert abs(again["wasserstein"][2] - point["wasserstein"]) < 3 * math.hypot(again["wasserstein_se"][2],
                                                                               point["wasserstein_se"])

    table = fidelity.tables_from_csv(tmp_path / "results.csv")
    assert "| fit | wasserstein | std_ratio | test_ll | check | seconds |" in table
    latest = again.iloc[2]  # the second run's row replaced the first's
    assert f"| short-svi | {latest['wasserstein']:.4f} ± {latest['wasserstein_se']:.4f} | " in table
    assert table.index(f"| {fidelity.REFERENCE} |") < table.index("| short-svi |")
    assert "- run: `python -m benchmarks.fidelity --case tiny --fits short-svi,refused" in table


def test_a_reference_whose_saved_draws_fail_its_check_is_used_for_its_run_and_not_saved(tmp_path, tiny_case,
                                                                                       monkeypatch, capsys):
    def problems(reference, f):  # the whole 4 x 10 pass, the 4 x 5 that fit in the saved bytes do not
        return [] if reference.num_draws == 10 else ["ESS of f(x) falls to 12"]

    for module in (fidelity, sys.modules["bnn.inference.evaluation.fidelity"], reference_module):
        monkeypatch.setattr(module, "reference_problems", problems)
    with pytest.warns(ConvergenceWarning):
        frame = fidelity.main(["--case", "tiny", "--fits", "short-svi", "--results", str(tmp_path)])
    assert frame["fit"].tolist() == [fidelity.REFERENCE, "short-svi"] and frame["wasserstein"][1] > 0
    said = capsys.readouterr().out
    assert "passes its check but is not saved: one draw in 2 (what fits in" in said
    assert "(ESS of f(x) falls to 12); give the case more draws" in said
    assert not (tmp_path / "tiny" / "reference").exists()


def test_an_unknown_fit_is_refused_before_any_work(tmp_path):
    with pytest.raises(SystemExit, match="unknown fit"):
        fidelity.main(["--case", "toy1d", "--fits", "laplace,nope", "--results", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def test_a_classifier_table_shows_agreement_and_total_variation(tmp_path):
    rows = [{"case": "digits-cnn-last-layer", "fit": "laplace", "seconds": 2.0, "test_ll": -0.1, "check": "passed",
             "agreement": 0.99, "agreement_se": 0.002, "total_variation": 0.03, "total_variation_se": 0.001,
             "command": "c", "commit": "abc", "machine": "m", "date": "d"}]
    pd.DataFrame(rows, columns=fidelity.COLUMNS).to_csv(tmp_path / "results.csv", index=False)
    table = fidelity.tables_from_csv(tmp_path / "results.csv")
    assert "| laplace | 0.9900 ± 0.0020 | 0.0300 ± 0.0010 | -0.1000 | passed | 2.0 |" in table
    assert fidelity.CASES["digits-cnn-last-layer"].description in table
