from __future__ import annotations

import pytest
from bnn.datasets import load_toy1d
from bnn.inference.curvature.evidence_search import MAX_EVALUATIONS
from bnn.inference.evaluation.cost import CostEstimate, gradient_count
from bnn.inference.fit import METHODS
from bnn.inference.map_search.map_cost import EXPECTED_EVALUATIONS, SMOOTH_POLISH
from bnn.models import BayesianMLP

from bnn.cli.main import main
from bnn.experiments.comparison.report_cost import ReportEstimate
from bnn.experiments.comparison.time_budget import Choice, RunPlan, choose_fits, cost_lines, parse_duration, plan

ROWS = 100
SECONDS_PER_GRADIENT = {"nuts": 1e-4, "svi": 2e-3, "laplace": 1e-3}  # a fake clock: the plan sees only these
SECONDS_PER_POLISH = 2e-2
REPORT = 30.0  # seconds the plans below keep for the report


@pytest.fixture(autouse=True)
def two_free_cores(monkeypatch):
    """The fake clock's machine: two cores, both free (whatever the load of the machine running the tests)."""
    monkeypatch.setattr("bnn.runtime.workers.free_cores", lambda: 2)
    monkeypatch.setattr("bnn.runtime.workers.available_cores", lambda: 2)


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("1h", 3600), ("1h30m", 5400), (" 2.5M ", 150)])
def test_durations_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10", "ten minutes", "10 m", "-5m", "0s", "m", ""])
def test_bad_durations_are_refused_naming_the_format(text):
    with pytest.raises(ValueError, match="--time-budget"):
        parse_duration(text)


def fake_choices(asked: dict[str, dict]) -> tuple[list[Choice], list]:
    """Choices as ``choose_fits`` makes them, timed by ``SECONDS_PER_GRADIENT`` instead of the machine."""
    choices, parsed = [], []
    for method, options in asked.items():
        options_set = METHODS.get(method).options.parse(method, options)
        count = gradient_count(method, options_set, ROWS)
        estimate = CostEstimate(method, count.gradients, SECONDS_PER_GRADIENT[method], count.parallel, count.bound, count.how,
                                polish=count.polish, polish_at_most=count.polish_at_most, seconds_per_polish=SECONDS_PER_POLISH)
        choices.append(Choice(method, options, estimate))
        parsed.append(options_set)
    return choices, parsed


ASKED = {"svi": {"steps": 10000}, "nuts": {"num_warmup": 1000, "num_samples": 1000, "num_chains": 2},
         "laplace": {"map_steps": 1000, "tune_prior_precision": False, "map_max_iter": 50}}
# untuned, one polish at most 50 iterations: 1000 Adam steps + 50 polish iterations, 2 s


def test_a_large_budget_changes_nothing():
    choices, parsed = fake_choices(ASKED)
    assert plan(choices, parsed, budget=10**6, rows=ROWS, report_seconds=REPORT) == choices


def test_a_budget_lowers_draws_and_steps_by_one_factor_and_the_plan_fits_in_it():
    choices, parsed = fake_choices(ASKED)
    # svi 20 s, nuts 2 x 2000 x 1023 x 1e-4 / 2 processes = 204.6 s, laplace 2 s; 100 s less the report's 30 s leaves
    # 70 s for the fits
    decided = plan(choices, parsed, budget=100, rows=ROWS, report_seconds=REPORT)
    svi, nuts, laplace = decided
    assert laplace == choices[2]
    assert sum(c.estimate.seconds for c in decided) <= 100 - REPORT
    factor = (70 - 2) / (20 + 204.6)
    assert svi.options["steps"] == int(10000 * factor)
    assert nuts.options["num_warmup"] == nuts.options["num_samples"] == int(1000 * factor)
    assert nuts.options["num_chains"] == 2
    assert nuts.note == (f"lowered to fit the time budget: num_warmup 1000 -> {int(1000 * factor)}, num_samples 1000 -> "
                         f"{int(1000 * factor)} (about {nuts.estimate.seconds:.0f} s)")
    assert not any(c.skipped for c in decided)


def test_floors_hold_and_what_cannot_fit_is_left_out_with_the_reason():
    choices, parsed = fake_choices(ASKED)
    # nuts at its floor, 2 x 200 x 1023 x 1e-4 / 2 = 20.5 s, does not fit in 14 s; svi at 1000 steps (2 s) does
    svi, nuts, laplace = plan(choices, parsed, budget=20, rows=ROWS, report_seconds=6)
    assert nuts.skipped and "left out: its smallest run (num_warmup 100, num_samples 100)" in nuts.note
    assert "raise --time-budget" in nuts.note
    assert not svi.skipped and svi.options["steps"] >= 1000 and not laplace.skipped
    [laplace_only] = plan(*fake_choices({"laplace": {"map_steps": 1000}}), budget=1, rows=ROWS, report_seconds=0.3)
    assert laplace_only.skipped and "exceeds what the time budget leaves" in laplace_only.note


def test_a_users_smaller_value_is_not_raised_to_the_floor():
    choices, parsed = fake_choices({"nuts": {"num_warmup": 50, "num_samples": 1000, "num_chains": 2}})
    [nuts] = plan(choices, parsed, budget=40, rows=ROWS, report_seconds=12)  # 28 s for the fit: the warm-up held at 50
    # needs a second shrink
    assert nuts.options["num_warmup"] == 50 and 100 <= nuts.options["num_samples"] < 1000 and not nuts.skipped
    assert nuts.estimate.seconds <= 40 - 12
    assert f"x ({50} + {nuts.options['num_samples']}) draws" in nuts.estimate.how


def test_choose_fits_measures_every_method_on_the_machine():
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    run = choose_fits(model, data, ["svi", "laplace", "mc-dropout"], [{"steps": 50}, {}, {}], budget=None)
    choices = run.fits
    # Laplace: 1000 Adam steps, then about EXPECTED_EVALUATIONS (at most MAX_EVALUATIONS) refits of the evidence
    # search and the final polish
    assert [c.estimate.gradients for c in choices] == [50, 1000, 3000]
    svi, laplace, _ = (c.estimate for c in choices)
    typical = SMOOTH_POLISH.at(30)  # counted on the 30 training rows
    polish = typical.first + (EXPECTED_EVALUATIONS - 1) * typical.refit + typical.final
    assert (laplace.polish, laplace.polish_at_most) == (polish, 1000 * (1 + MAX_EVALUATIONS))
    assert laplace.seconds_per_polish > 0 and svi.polish == svi.polish_at_most == svi.seconds_per_polish == 0
    assert laplace.seconds < laplace.most_seconds and "(expected; at most" in laplace.describe()
    assert all(c.estimate.seconds_per_gradient > 0 and c.note is None for c in choices)
    # the report evaluates each fit's draws as asked: SVI's, Laplace's and MC dropout's 1,000 (their default)
    assert run.report.draws == (1000, 1000, 1000) and run.report.rows == 40 and run.report.seconds > 0


def test_a_network_with_hierarchical_priors_is_estimated_too():
    # its weights have no prior of their own to start a MAP from: the units are timed with Gaussian priors in their
    # place (before, compare --prior ard --methods laplace stopped here with a TypeError)
    data = load_toy1d(n_train=30, n_test=10)
    for prior in ("ard", "layer-scale"):
        model = BayesianMLP(1, 1, hidden=(3,), prior=prior, likelihood={"name": "gaussian", "scale": None})
        [laplace] = choose_fits(model, data, ["laplace"], [{}], budget=None).fits
        assert laplace.estimate.seconds_per_gradient > 0 and laplace.estimate.seconds_per_polish > 0
        assert model.hierarchical_sites  # the user's network keeps its priors


def test_compare_refuses_a_budget_no_method_fits_in_before_any_fit(tmp_path, capsys):
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--methods", "laplace", "--hidden", "3", "--time-budget", "0.001s", "--out", str(out), "--quiet"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "laplace: about" in captured.out and "left out" in captured.out
    assert "no method fits in the time budget" in captured.err and not out.exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--time-budget", "ten", "--out", str(out)])
    assert exit_info.value.code == 2 and "takes a duration such as 90s" in capsys.readouterr().err


def test_a_long_run_without_a_budget_is_announced_with_the_fix():
    report = ReportEstimate(draws=(2000,), rows=200, first_draws_seconds=1.0, draw_seconds=1e-3, figure_seconds=0.1)
    # 1 + 1980 x 1e-3 + (9 + 16) x 0.1 = 5.48 s
    choices, _ = fake_choices({"nuts": {"num_warmup": 1000, "num_samples": 1000, "num_chains": 2}})  # 204.6 s
    lines = cost_lines(RunPlan(choices, report), None)
    assert lines[-2].startswith("- nuts: about 3.4 min (every tree at full depth)")
    assert lines[-1].startswith("- report: about 5 s: 1 fits of 2,000 draws on 200 rows")
    choices, _ = fake_choices({"nuts": {"num_warmup": 5000, "num_samples": 5000, "num_chains": 2}})  # 17 min
    assert cost_lines(RunPlan(choices, report), None)[-1] == (
        "Warning: these fits and the report may take up to about 17.1 min; to bound them, stop this run (Ctrl-C; "
        "finished fits are kept) and give --time-budget, for example --time-budget 30m.")


def test_under_a_budget_the_report_is_reestimated_for_the_fits_kept_as_lowered(monkeypatch):
    # the report's units are measured once, on the draws as asked; the plan keeps that (larger) estimate out of the
    # budget, and the run's report estimate is then counted on the draws the fits will hold
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    measured = ReportEstimate(draws=(), rows=40, first_draws_seconds=0.5, draw_seconds=1e-3, figure_seconds=0.1)
    monkeypatch.setattr("bnn.experiments.comparison.time_budget.estimate_report",
                        lambda model, dataset, draws: measured.for_draws(draws))
    asked = [{"num_warmup": 10**4, "num_samples": 10**4, "num_chains": 2}, {"map_steps": 10**6}]
    run = choose_fits(model, data, ["nuts", "laplace"], asked, budget=60)
    nuts, laplace = run.fits
    assert laplace.skipped and not nuts.skipped and nuts.options["num_samples"] < 10**4
    assert run.report.draws == (2 * nuts.options["num_samples"],)
    assert run.report.seconds < measured.for_draws((2 * 10**4, 1000)).seconds
