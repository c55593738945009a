"""A cell's problems in ``bnn uci``'s terms (issue 72): ``--set <method>.<option>=``, each said once, chains and
members counted as the cell ran them."""

import pytest
from bnn.datasets.uci import read_uci_table

from bnn.experiments.uci.advice import for_uci
from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import run_cell

# the chains' MAP starts cut short (50 Adam steps, 5 polish iterations in each refit of the evidence search): the
# test reads the chains, not their starts
SHORT_MAP_STARTS = {"map_steps": 50, "map_max_iter": 5}

SVI_RISING = ("the ELBO was still rising when SVI stopped: its mean over the last 119 steps (the last tenth of the run's "
              "learning rate) is 16.2 nats above the 50 steps before (12.8 standard errors); give it more steps (steps=, "
              "--steps)")
ENSEMBLE = ("the MAP fits of members [3] did not converge (Newton decrement above map_tolerance=0.1, and the log joint "
            "not flat when the polish stopped): raise map_max_iter or map_steps (or map_lr), or loosen map_tolerance")
SGLD = ("SGLD did not converge: the chains disagree on the predictions: predictive R-hat (of f(x) at the training inputs "
        "and of the noise) 2.495 > 1.01; the predictions' smallest bulk ESS is 2.7 < 200 (100 per chain). Raise "
        "num_warmup and num_samples (or thin), run two or more chains (num_chains), or tune step_share (or step_size); "
        "see posterior.record.diagnostics.")
NUTS = ("NUTS did not converge (4 chain(s) x 700 draws): ... try a longer adaptation and more draws (num_warmup=1000, "
        "num_samples=1000), more chains (num_chains=4), chains started at their own MAP points (init='map', the default)")
STALLED = ("the polish stalled: at the rise of the log joint of its last steps it would not reach map_tolerance within "
           "map_max_iter; raise map_max_iter far above the iterations taken, loosen map_tolerance")


def test_svis_advice_names_the_set_option_of_bnn_uci_not_a_flag_it_lacks():
    text = for_uci(SVI_RISING, "svi")
    assert text.endswith("give it more steps (--set svi.steps=)") and "--steps" not in text
    assert "over the last 119 steps" in text  # prose that says "steps" is left alone


def test_every_option_the_advice_names_is_a_set_option_and_a_reported_value_stays():
    assert for_uci(ENSEMBLE, "ensemble", members=5).endswith(
        "(Newton decrement above map_tolerance=0.1, and the log joint not flat when the polish stopped): raise "
        "--set ensemble.map_max_iter= or --set ensemble.map_steps= (or --set ensemble.map_lr=), or loosen "
        "--set ensemble.map_tolerance=")
    assert for_uci(NUTS, "nuts", chains=4).endswith(
        "(--set nuts.num_warmup=1000, --set nuts.num_samples=1000), more chains (--set nuts.num_chains=4), chains "
        "started at their own MAP points (--set nuts.init=map, the default)")
    assert for_uci(STALLED, "laplace") == (
        "the polish stalled: at the rise of the log joint of its last steps it would not reach map_tolerance within "
        "map_max_iter; raise --set laplace.map_max_iter= far above the iterations taken, loosen --set "
        "laplace.map_tolerance=")
    assert for_uci("raise --num-chains 4", "nuts") == "raise --set nuts.num_chains=4"


def test_a_cell_that_ran_two_chains_is_not_told_to_run_two_or_more():
    text = for_uci(SGLD, "sgld", chains=2)
    assert "two or more" not in text
    assert ("Raise --set sgld.num_warmup= and --set sgld.num_samples= (or --set sgld.thin=), run more chains than the 2 "
            "this cell ran (--set sgld.num_chains=), or tune --set sgld.step_share= (or --set sgld.step_size=)") in text
    assert "run two or more chains" in for_uci(SGLD, "sgld", chains=1)  # one chain: the advice holds as it is


def test_members_are_named_as_counted_from_0_and_of_how_many():
    assert for_uci(ENSEMBLE, "ensemble", members=5).startswith("the MAP fits of member 3 (counted from 0, of 5) did not")
    assert for_uci(ENSEMBLE.replace("[3]", "[0, 4]"), "ensemble", members=5).startswith(
        "the MAP fits of members 0 and 4 (counted from 0, of 5) did not")
    assert for_uci(ENSEMBLE.replace("[3]", "[0, 1, 2]"), "ensemble", members=3).startswith("the MAP fits of all 3 members")


@pytest.mark.long
def test_a_cells_problems_say_each_thing_once_in_bnn_ucis_terms(tiny_uci):
    table = read_uci_table(tiny_uci, "tiny", [1])
    ensemble = run_cell(table, Cell("tiny", "ensemble", 1, 10, {"num_members": 3, "map_steps": 5, "map_max_iter": 2,
                                                                "member_method": "sequential", "progress": False,
                                                                "seed": 1}))
    assert ensemble["verdict"] == "not converged"
    problems = ensemble["problems"]
    assert problems.count("did not converge") == 1, problems  # the record's problem, not its warning again
    assert "members [" not in problems and "--set ensemble.map_max_iter=" in problems
    svi = run_cell(table, Cell("tiny", "svi", 1, 10, {"steps": 200, "lr": 1e-3, "num_samples": 10, "progress": False,
                                                      "seed": 1}))
    assert svi["verdict"] == "not converged" and svi["problems"].count("--set svi.steps=") == 1, svi["problems"]
    assert "--steps" not in svi["problems"]
    sgld = run_cell(table, Cell("tiny", "sgld", 1, 10, {"num_chains": 2, "num_warmup": 50, "num_samples": 40,
                                                        "map_method": "sequential", "progress": False, "seed": 1,
                                                        **SHORT_MAP_STARTS}))
    assert sgld["verdict"] == "not converged" and "two or more chains" not in sgld["problems"]
    assert "run more chains than the 2 this cell ran (--set sgld.num_chains=)" in sgld["problems"]
