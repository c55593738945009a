"""``bnn continual``'s refusals and failures as one line of ``error: ...``, never a traceback."""

from __future__ import annotations

import pytest

from bnn.cli.main import main


def run_and_read_error(capsys, arguments: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["continual", "--quiet", *arguments])
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_a_mean_eta_whose_updates_cannot_settle_is_refused_before_any_method_runs(tmp_path, capsys):
    error = run_and_read_error(capsys, ["--methods", "ucl,bgd", "--mean-eta", "1e6", "--out", str(tmp_path / "run")])
    assert error.startswith("error: mean_eta=1e+06 ") and "pass a mean_eta below 2 x steps = 3000" in error, error
    assert not (tmp_path / "run").exists()


def test_a_bgd_that_leaves_the_finite_numbers_ends_with_its_own_message(tmp_path, capsys):
    error = run_and_read_error(capsys, ["--benchmark", "moving-regression", "--methods", "bgd", "--mean-eta", "50",
                                        "--steps", "200", "--out", str(tmp_path / "run")])
    assert error.startswith("error: bgd: the Gaussian left the finite numbers at update "), error
    assert "lower std_init (now 0.0025) or mean_eta (now 50.0)" in error and "Traceback" not in error
