from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.evaluation import reliability
from bnn.inference.evaluation.reliability import (
    fit_warnings,
    pareto_k_lines,
    ranking_verdict,
    units_lines,
    warning_column_line,
    with_flags,
)
from bnn.models import BayesianMLP

from bnn.cli.main import build_parser

INFERENCE = Path(reliability.__file__).resolve().parents[1]
WARNING_SOURCES = sorted(INFERENCE.rglob("*.py"))
"""Every module of bnn.inference: records, fits, the methods' advice, the MAP search's, the report's."""


def parser_flags(command: str) -> set[str]:
    subcommands = next(a for a in build_parser()._actions if a.dest == "command")
    return {flag for action in subcommands.choices[command]._actions for flag in action.option_strings}


def advice_texts(path: Path) -> list[str]:
    """The string literals (f-string parts included) of ``path`` that tell the user what to change."""
    texts = [node.value for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Constant)
             and isinstance(node.value, str)]
    return [text for text in texts if re.search(r"\b(raise|lower|loosen|tune|try)\b", text, re.IGNORECASE)]


@pytest.mark.parametrize("path", WARNING_SOURCES, ids=lambda p: str(p.relative_to(INFERENCE)))
def test_every_option_a_warning_tells_users_to_change_is_on_the_command_line(path):
    flags = parser_flags("compare") | parser_flags("fit")
    named = {flag for text in advice_texts(path) for flag in re.findall(r"--[a-z][a-z-]*", with_flags(text))}
    assert named - flags == set(), f"{path.name} tells users to change options the command line lacks"


def test_option_names_become_flags_and_plain_words_stay():
    assert with_flags("raise map_steps or map_lr, or loosen map_tolerance; more steps") == (
        "raise --map-steps or --map-lr, or loosen --map-tolerance; more steps")
    assert with_flags("the not_an_option stays") == "the not_an_option stays"


@pytest.mark.long
def test_an_elbo_still_rising_is_reported_once():
    """SVI's record reports its own unfinished ELBO (:mod:`bnn.inference.core.objective_trend`); the report adds no
    second line."""
    model = BayesianMLP(1, 1, hidden=(8,))
    with pytest.warns(ConvergenceWarning, match="ELBO was still rising"):
        svi = fit(model, load_toy1d(n_train=40, n_test=10), "svi", steps=200, lr_schedule="constant", lr=0.003,
                  num_samples=10, seed=0, progress=False)
    [line] = fit_warnings({"svi": svi})
    assert line.startswith("**Warning: svi**: the ELBO was still rising when SVI stopped") and "--steps" in line


def test_units_are_stated_with_the_targets_scale():
    [line] = units_lines(2.0)
    assert "original units" in line and "standardised units" in line and "log s_y = 0.6931" in line
    assert "(here" not in units_lines(None)[0]  # classification: no target scale to state


def test_the_warning_column_is_explained_with_arviz_threshold():
    # ArviZ's good_k = min(1 - 1/log10(S), 0.7): 1 - 1/3 for S = 1000, 0.7 from S = 2155 on
    assert "(0.67 for the fewest here, S = 1000)" in warning_column_line(1000)
    assert "(0.70 for the fewest here, S = 4000)" in warning_column_line(4000)


def table_and_ranking(bad_k: dict[str, int], test_ll: dict[str, float], order: list[str]):
    table = pd.DataFrame({"loo_bad_k": bad_k, "test_ll": test_ll})
    return pd.DataFrame({"elpd_loo": range(len(order), 0, -1)}, index=order), table


def test_a_ranking_built_on_pareto_k_above_07_is_marked_unreliable_with_the_counts():
    ranking, table = table_and_ranking({"laplace": 340, "svi": 0, "nuts": 2}, {"laplace": -2.5, "svi": -1.0, "nuts": -0.9},
                                       ["laplace", "svi", "nuts"])
    verdict, disagreement = ranking_verdict(ranking, table)
    assert verdict.startswith("**The ranking is unreliable**: laplace (340 points), nuts (2 points) have")
    assert disagreement.startswith("The ranking puts laplace first, but nuts has the best `test_ll`")
    assert pareto_k_lines(table, 1439) == [
        "**Warning: laplace**: 340 of 1439 training points (23.6%) have Pareto k > 0.7: its PSIS-LOO and WAIC are unreliable.",
        "**Warning: nuts**: 2 of 1439 training points (0.1%) have Pareto k > 0.7: its PSIS-LOO and WAIC are unreliable."]


def test_a_ranking_with_every_k_good_and_the_best_test_ll_first_says_so():
    ranking, table = table_and_ranking({"nuts": 0, "svi": 0}, {"nuts": 0.5, "svi": 0.1}, ["nuts", "svi"])
    assert ranking_verdict(ranking, table) == ["Every ranked fit has all its Pareto k <= 0.7: the PSIS-LOO estimates "
                                               "behind the ranking are reliable."]
