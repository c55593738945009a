import math
import warnings

import numpy as np
import pytest
from bnn.datasets.uci import read_uci_table
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.evaluation.set_coverage import carve_calibration, set_coverage

from bnn.experiments.uci import protocol
from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import (
    AGREEMENT_COLUMNS,
    FIXED,
    choose_on_validation,
    failed_row,
    fit_cell,
    run_cell,
    selection,
    uci_model,
    validation_part,
)
from bnn.runtime.workers import one_torch_thread

# the chains' MAP starts cut short (50 Adam steps, 5 polish iterations in each refit of the evidence search): the
# test reads the chains, not their starts
SHORT_MAP_STARTS = {"map_steps": 50, "map_max_iter": 5}


def test_the_validation_part_comes_from_the_training_rows_only(tiny_uci):
    table = read_uci_table(tiny_uci, "tiny", [0])
    part = validation_part(table, 0, seed=0)
    train, test = table.splits[0]
    assert len(part.x_train) + len(part.x_test) == len(train)
    held = round(0.2 * len(train))
    assert len(part.x_test) == held
    raw_valid = part.x_test * part.x_scaler.std + part.x_scaler.mean
    test_inputs = table.data[test][:, table.features]
    assert not np.isclose(raw_valid.numpy()[:, None, :], test_inputs[None], atol=1e-5).all(-1).any()


def test_mc_dropout_searches_its_rate_and_tau_jointly_on_validation_refits_with_the_best_and_says_so(tiny_uci):
    table = read_uci_table(tiny_uci, "tiny", [0])
    options = {"epochs": 3, "batch_size": 32, "lr": 1e-3, "weight_init": "glorot", "num_samples": 10, "progress": False,
               "seed": 0}
    grid = {"dropout_rate": [0.01, 0.2], "noise_precision": [0.5, 20.0]}
    cell = Cell("tiny", "mc-dropout", 0, 10, options, grid)
    chosen = choose_on_validation(table, cell)
    data = validation_part(table, 0, seed=0)
    scores = {(rate, tau): evaluate(fit_cell("mc-dropout", data, 10, {**options, "dropout_rate": rate,
                                                                         "noise_precision": tau}), data)["test_ll"]
              for rate in grid["dropout_rate"] for tau in grid["noise_precision"]}
    assert len(set(scores.values())) == 4  # each pair fits its own network
    assert (chosen["dropout_rate"], chosen["noise_precision"]) == max(scores, key=scores.get)
    result = run_cell(table, cell)
    assert result["chosen"] == f"dropout_rate={chosen['dropout_rate']}, noise_precision={chosen['noise_precision']}"
    assert result["selection"].startswith("the paper's protocol: dropout rate and noise precision tau jointly over the "
                                          "folder's grid on a random 20% of the training split")
    refit = fit_cell("mc-dropout", table.split(0), 10, {**options, **chosen})
    assert refit.model.likelihood.scale == pytest.approx(1 / (float(table.split(0).y_scaler.std) *
                                                              math.sqrt(chosen["noise_precision"])))
    assert selection("mc-dropout", {}).startswith("fixed: the method's defaults")


def test_a_grid_with_no_finite_validation_score_is_a_floating_point_error(tiny_uci, monkeypatch):
    table = read_uci_table(tiny_uci, "tiny", [0])
    monkeypatch.setattr(protocol, "evaluate", lambda posterior, data: {"test_ll": math.nan})
    cell = Cell("tiny", "mc-dropout", 0, 10, {"steps": 2, "num_samples": 2, "progress": False, "seed": 0},
                {"dropout_rate": [0.01, 0.2]})
    with pytest.raises(FloatingPointError, match=r"tiny/mc-dropout/split-0: no candidate of \{'dropout_rate': \[0.01, "
                                                 r"0.2\]\} gave a finite validation log-likelihood"):
        choose_on_validation(table, cell)


def test_the_selection_names_the_options_the_user_set(tiny_uci):
    cell = Cell("tiny", "svi", 0, 10, {"steps": 20, "num_samples": 10, "progress": False, "seed": 0},
                set_by_user={"steps": 20})
    assert run_cell(read_uci_table(tiny_uci, "tiny", [0]), cell)["selection"] == (
        "ELBO: weights and noise scale by the ELBO; prior N(0, 1) fixed; except these, set by the user: steps=20")
    assert failed_row(cell, "ValueError: no", 1)["selection"].endswith("; except these, set by the user: steps=20")
    assert selection("sgld", {}, {}) == selection("sgld", {}) == FIXED


@pytest.mark.long
@pytest.mark.parametrize("method", ["svi", "laplace"])
def test_a_cell_gives_the_same_numbers_twice(tiny_uci, method):
    table = read_uci_table(tiny_uci, "tiny", [1])
    options = {"svi": {"steps": 20, "num_samples": 10}, "laplace": {"map_steps": 50, "num_samples": 10}}[method]
    cell = Cell("tiny", method, 1, 10, {**options, "progress": False, "seed": 1})
    first, second = run_cell(table, cell), run_cell(table, cell)
    assert (first["rmse"], first["test_ll"]) == (second["rmse"], second["test_ll"])
    assert first["verdict"] in ("converged", "not converged", "no check")


def test_a_cell_records_the_fits_warnings_but_not_torchs_deprecation_notices(tiny_uci, monkeypatch):
    fitted = protocol.fit_cell

    def fit_and_warn(*args, **kwargs):
        posterior = fitted(*args, **kwargs)
        warnings.warn_explicit("`torch.jit.script` is deprecated.", DeprecationWarning, "_script.py", 1,
                               module="torch.jit._script")
        warnings.warn("the fit's own warning", RuntimeWarning, stacklevel=2)
        return posterior

    monkeypatch.setattr(protocol, "fit_cell", fit_and_warn)
    table = read_uci_table(tiny_uci, "tiny", [1])
    row = run_cell(table, Cell("tiny", "svi", 1, 10, {"steps": 20, "num_samples": 10, "progress": False, "seed": 1}))
    assert "the fit's own warning" in row["problems"] and "deprecated" not in row["problems"]


def test_the_validation_candidates_warnings_are_not_the_cells_problems(tiny_uci, monkeypatch):
    """The grid's candidate fits choose the options; the cell reports the warnings of the fit it scores alone."""
    fitted, fits = protocol.fit_cell, []

    def fit_and_warn(*args, **kwargs):
        fits.append(args[1].name)
        warnings.warn(f"a warning of fit {len(fits)} on {args[1].name}", RuntimeWarning, stacklevel=2)
        return fitted(*args, **kwargs)

    monkeypatch.setattr(protocol, "fit_cell", fit_and_warn)
    options = {"steps": 5, "num_samples": 2, "progress": False, "seed": 0}
    row = run_cell(read_uci_table(tiny_uci, "tiny", [0]), Cell("tiny", "mc-dropout", 0, 10, options,
                                                               {"dropout_rate": [0.01, 0.2]}))
    assert fits == ["tiny-validation", "tiny-validation", "tiny"]
    assert row["problems"] == "a warning of fit 3 on tiny"


@pytest.mark.long
def test_a_cell_of_chains_measures_their_agreement_at_the_test_inputs_and_one_without_chains_leaves_it_empty(tiny_uci):
    table = read_uci_table(tiny_uci, "tiny", [1])
    chains = run_cell(table, Cell("tiny", "sgld", 1, 10, {"num_chains": 2, "num_warmup": 50, "num_samples": 40,
                                                          "map_method": "sequential", "progress": False, "seed": 1,
                                                          **SHORT_MAP_STARTS}))
    r_hat_max, within_1_1, within_1_01 = (chains[column] for column in AGREEMENT_COLUMNS)
    assert r_hat_max >= 1.0 and 0.0 <= within_1_01 <= within_1_1 <= 1.0
    one = run_cell(table, Cell("tiny", "svi", 1, 10, {"steps": 20, "num_samples": 10, "progress": False, "seed": 1}))
    assert all(one[column] is None for column in AGREEMENT_COLUMNS)
    assert all(failed_row(Cell("tiny", "nuts", 1, 10, {}), "boom", 1)[column] is None for column in AGREEMENT_COLUMNS)


@pytest.mark.long
def test_conformal_intervals_come_from_a_second_fit_and_leave_the_papers_numbers_alone(tiny_uci):
    # the conformal columns are the method's second fit, whatever the method (conformal_measures calls fit_cell as the
    # cell's own fit does): SVI's 20 steps, not Laplace's evidence search of the noise (some 15 MAP refits a fit)
    table = read_uci_table(tiny_uci, "tiny", [1])
    options = {"steps": 20, "num_samples": 10, "progress": False, "seed": 1}
    plain = run_cell(table, Cell("tiny", "svi", 1, 10, options))
    with_sets = run_cell(table, Cell("tiny", "svi", 1, 10, options, conformal=0.2))
    assert (plain["rmse"], plain["test_ll"]) == (with_sets["rmse"], with_sets["test_ll"])
    assert plain["conformal_coverage"] is None and plain["conformal_width"] is None
    data = table.split(1)
    fitted, calibration = carve_calibration(data, 0.2, 1)
    with one_torch_thread():  # as run_cell computes
        expected = set_coverage(fit(uci_model(data.in_features, 10), fitted, "svi", **options), data, calibration)
    assert with_sets["conformal_coverage"] == expected["conformal_coverage"]
    assert with_sets["conformal_width"] == expected["conformal_width"] > 0



@pytest.mark.parametrize("method", ["multiswag", "ensemble", "swag"])
def test_a_cells_members_run_in_its_own_process_unless_the_user_set_otherwise(tiny_uci, monkeypatch, method):
    from bnn.inference.fit import METHODS
    from bnn.inference.map_search import map_starts

    monkeypatch.setattr(map_starts, "available_cores", lambda: 8)  # a machine where "auto" would start processes
    given = []
    monkeypatch.setattr(protocol, "fit", lambda model, data, method, **options: given.append(options))
    data = read_uci_table(tiny_uci, "tiny", [0]).split(0)
    fit_cell(method, data, 10, {"num_members": 4, "progress": False, "seed": 0})
    fit_cell(method, data, 10, {"num_members": 4, "progress": False, "seed": 0, "member_method": "parallel"})
    workers = [METHODS.get(method).options.parse(method, options).workers() for options in given]
    assert workers == [1, 4]  # --workers 1 is one process; the user's --set member_method=parallel wins
