import math

import pandas as pd

from bnn.experiments.uci.protocol import AGREEMENT_COLUMNS
from bnn.experiments.uci.published import MC_DROPOUT, MC_DROPOUT_GRID, PUBLISHED
from bnn.experiments.uci.table import markdown, summary, write_tables
from tests.support.uci import UCI


def rows(dataset, method, rmses, lls, status=None):
    status = status or ["ok"] * len(rmses)
    return [{"dataset": dataset, "method": method, "split": k, "status": s, "rmse": r, "test_ll": ll, "seconds": 1.0,
             "verdict": "converged" if k == 0 else "not converged", "selection": "ELBO", "chosen": "", "problems": "",
             "attempts": 1} for k, (r, ll, s) in enumerate(zip(rmses, lls, status))]


def test_summary_is_the_mean_and_its_standard_error_over_finished_splits():
    frame = pd.DataFrame(rows("yacht", "svi", [1.0, 2.0, 4.0, None], [-1.0, -2.0, -3.0, None],
                              ["ok", "ok", "ok", "failed"]))
    row = summary(frame).iloc[0]
    assert (row.n, row.failed, row.converged) == (3, 1, 1)
    assert math.isclose(row.rmse, 7 / 3)
    assert math.isclose(row.rmse_se, math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / (3 * 2)))
    assert math.isclose(row.test_ll, -2.0) and math.isclose(row.test_ll_se, math.sqrt(2 / 6))


def test_bold_where_ours_beats_every_published_number_and_the_count_against_mc_dropout(tmp_path):
    best_rmse = min(p.results["yacht"][0] for p in PUBLISHED)
    dropout_ll = MC_DROPOUT.results["yacht"][2]
    results = rows("yacht", "laplace", [best_rmse - 0.5, best_rmse - 0.5], [dropout_ll + 0.1, dropout_ll + 0.1])
    results += rows("yacht", "svi", [best_rmse + 0.5], [dropout_ll - 0.1])
    frame = write_tables(results, tmp_path, "bnn uci ...")
    text = (tmp_path / "table.md").read_text()
    assert f"**{best_rmse - 0.5:.3f} ± 0.000 (2)**" in text  # lower than every published RMSE
    assert f"| {best_rmse + 0.5:.3f} (1) |" in text  # one split: no standard error, not bold
    assert f"{dropout_ll + 0.1:.3f} ± 0.000 (2) |" in text and f"**{dropout_ll + 0.1:.3f}" not in text  # deep ens. better
    assert "- laplace: 1 of 1 data sets (yacht)\n- svi: 0 of 1 data sets\n" in text
    assert pd.read_csv(tmp_path / "results.csv").shape == (3, 19) and len(frame) == 3


def test_a_data_set_nobody_published_has_empty_published_cells():
    text = markdown(pd.DataFrame(rows("unseen", "svi", [1.0, 2.0], [-1.0, -2.0])))
    assert "| unseen | 1.500 ± 0.500 (2) |  |  |  |  |  |" in text
    assert "- svi: 0 of 0 data sets" in text


def test_mc_dropout_is_set_against_both_published_columns_in_standard_errors_of_the_difference():
    published = MC_DROPOUT.results["yacht"][2]  # -1.55 ± 0.12, a standard deviation over 20 splits
    lls = [published + 0.1, published + 0.3]  # mean published + 0.2, standard error 0.1
    text = markdown(pd.DataFrame(rows("yacht", "mc-dropout", [1.0, 1.0], lls) + rows("yacht", "svi", [1.0, 2.0], lls)))
    d = 0.2 / math.hypot(0.1, 0.12 / math.sqrt(20))
    grid_d = (published + 0.2 - MC_DROPOUT_GRID.results["yacht"][2]) / math.hypot(0.1, MC_DROPOUT_GRID.results["yacht"][3])
    assert (f"| yacht | {published + 0.2:.3f} ± 0.100 (2) | -1.55 ± 0.027 | {d:+.1f} | -1.25 ± 0.010 | {grid_d:+.1f} |"
            in text)
    assert text.count("| yacht | ") == 2 + 2 + 1 + 2  # the two metric tables, calibration, the methods, the comparison
    assert "MC dropout against" not in markdown(pd.DataFrame(rows("yacht", "svi", [1.0, 2.0], lls)))


def test_published_tables_cover_the_shipped_data_sets_with_a_mean_and_its_spread():
    shipped = sorted(p.name for p in UCI.iterdir() if p.is_dir()) if UCI.is_dir() else []
    for method in PUBLISHED:
        assert set(shipped) <= set(method.results), method.label
        assert all(len(entry) == 4 and entry[1] >= 0 and entry[3] >= 0 for entry in method.results.values())


def test_the_calibration_table_averages_the_cells_that_measured_it_and_names_those_that_did_not():
    measured = [{**row, "crps": crps, "pit_calibration_error": pit}
                for row, crps, pit in zip(rows("yacht", "laplace", [1.0, 2.0], [-1.0, -1.0]), [0.5, 0.7], [0.02, 0.04])]
    before = rows("yacht", "svi", [1.0], [-1.0])  # written before cells measured calibration: no such fields
    text = markdown(pd.DataFrame(measured + before))
    assert "| yacht | laplace | 0.600 ± 0.100 (2) | 0.030 ± 0.010 (2) |" in text
    assert "| yacht | svi | not measured | not measured |" in text
    assert "| yacht | svi | not measured | not measured |" in markdown(pd.DataFrame(before))  # no column at all
    assert "Conformal" not in markdown(pd.DataFrame(measured + before))  # no cell measured conformal intervals


def test_the_conformal_table_appears_when_a_cell_measured_its_intervals():
    measured = [{**row, "conformal_coverage": coverage, "conformal_width": width}
                for row, coverage, width in zip(rows("yacht", "laplace", [1.0, 2.0], [-1.0, -1.0]), [0.9, 0.8], [2.0, 3.0])]
    text = markdown(pd.DataFrame(measured + rows("yacht", "svi", [1.0], [-1.0])))
    assert "| yacht | laplace | 0.850 ± 0.050 (2) | 2.500 ± 0.500 (2) |" in text
    assert "| yacht | svi | not measured | not measured |" in text



def test_the_agreement_table_averages_the_cells_of_chains_and_is_left_out_when_no_cell_has_chains():
    chains = [{**row, "test_r_hat_max": r_hat, "test_r_hat_within_1_1": within, "test_r_hat_within_1_01": within / 2}
              for row, r_hat, within in zip(rows("yacht", "nuts", [1.0, 2.0], [-1.0, -1.0]), [1.2, 1.4], [0.9, 0.7])]
    text = markdown(pd.DataFrame(chains + rows("yacht", "svi", [1.0], [-1.0])))
    assert "| yacht | nuts | 1.300 ± 0.100 (2) | 0.800 ± 0.100 (2) | 0.400 ± 0.050 (2) |" in text
    agreement = text.split("agreement at the test inputs")[1].split("\n\n")[1]  # the table's lines
    assert "| yacht | nuts |" in agreement and "| yacht | svi |" not in agreement
    assert "agreement at the test inputs" not in markdown(pd.DataFrame(rows("yacht", "svi", [1.0], [-1.0])))


def test_tiny_values_show_significant_digits_not_zeros():
    measured = [{**row, "crps": crps, "pit_calibration_error": 0.02}
                for row, crps in zip(rows("naval", "svi", [0.0011, 0.0013], [4.0, 4.2]), [0.00052, 0.00058])]
    text = markdown(pd.DataFrame(measured))
    assert "| naval | 0.0012 ± 0.0001 (2) |" in text  # RMSE: not 0.001 ± 0.000; its s.e. at the mean's decimals
    assert "| naval | svi | 0.00055 ± 0.00003 (2) | 0.020 ± 0.000 (2) |" in text  # CRPS; an exact 0 stays 0.000
    assert "| naval | 4.100 ± 0.100 (2) |" in text  # three decimals where they show two digits or more


def test_bold_needs_two_splits_and_a_lead_beyond_the_standard_error():
    best_rmse = min(p.results["yacht"][0] for p in PUBLISHED)
    one_split = markdown(pd.DataFrame(rows("yacht", "svi", [best_rmse - 0.3], [-1.0])))
    assert f"| yacht | {best_rmse - 0.3:.3f} (1) |" in one_split and "**" not in one_split.split("## Test RMSE")[1]
    within = markdown(pd.DataFrame(rows("yacht", "svi", [best_rmse - 0.4, best_rmse + 0.2], [-1.0, -1.0])))
    assert f"| yacht | {best_rmse - 0.1:.3f} ± 0.300 (2) |" in within  # ahead by 0.1, less than its s.e. of 0.3
    beyond = markdown(pd.DataFrame(rows("yacht", "svi", [best_rmse - 0.5, best_rmse - 0.3], [-1.0, -1.0])))
    assert f"| yacht | **{best_rmse - 0.4:.3f} ± 0.100 (2)** |" in beyond  # ahead by 0.4, beyond its s.e. of 0.1


def test_the_tables_say_what_each_verdict_checks_and_why_converged_may_sit_beside_a_high_r_hat():
    agreement = dict(zip(AGREEMENT_COLUMNS, [2.84, 0.0, 0.0]))
    cells = [{**row, **agreement, "verdict": "converged"} for row in rows("yacht", "multiswag", [1.0, 1.1], [-1.0, -1.1])]
    cells += [{**row, **agreement, "verdict": "not converged"} for row in rows("yacht", "sgld", [1.0, 1.1], [-1.0, -1.1])]
    text = markdown(pd.DataFrame(cells + rows("yacht", "svi", [1.0, 1.1], [-1.0, -1.1])))
    assert "| yacht | multiswag | 2.840 ± 0.000 (2) | 0.000 ± 0.000 (2) | 0.000 ± 0.000 (2) |" in text
    assert "| 2 | 0 | 2 of 2 |" in text  # multiswag's cells: converged
    assert ("- multiswag: its verdict checks that every member's MAP start converged and no member's Gaussian is wider "
            "than a posterior Gaussian of the model (its effective number of parameters above the model's latent values), "
            "not this agreement: the groups of "
            "draws compared here (its members, each fitted from a start of its own) are not Markov chains meant to meet, "
            "so converged beside a high R-hat is no contradiction") in text
    assert "- sgld: its verdict reads the same R-hat, at the training inputs: a high R-hat here goes with not converged" in text
    methods = text.split("## Methods")[1]
    assert "What converged checks" in methods and "- multiswag: every member's MAP start converged" in methods
    assert "- svi: SVI's own check: not converged when the ELBO was still rising at the end" in methods
    assert "- sgld: its chains agree at the training inputs (predictive R-hat at most 1.01)" in methods
