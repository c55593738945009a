"""Property-based tests of the command line: any option values give a run or a clean exit 2 with a message."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.cli import main

NUMBERS = st.one_of(st.integers(-3, 4).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str),
                    st.sampled_from(["", "abc", "1e400", "-0", "0x10"]))
OPTIONS = st.fixed_dictionaries({}, optional={
    "--steps": NUMBERS, "--lr": NUMBERS, "--batch-size": NUMBERS, "--seed": NUMBERS, "--num-draws": NUMBERS,
    "--hidden": st.one_of(NUMBERS, st.lists(st.integers(-1, 3), max_size=3).map(lambda w: ",".join(map(str, w)))),
    "--noise": st.one_of(NUMBERS, st.just("learned")),
    "--prior-option": st.sampled_from(["scale=0", "scale=-1", "scale=nan", "scale=2", "sd=1", "scale"]),
    "--activation": st.sampled_from(["tanh", "relu", "swish"]),
    "--num-particles": NUMBERS,
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=OPTIONS)
def test_options_end_in_a_fit_or_a_clean_error(options, capsys):
    arguments = [item for key, value in options.items() for item in (key, value)]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        try:
            main(["fit", "--dataset", "toy1d", "--quiet", "--out", str(out), "--num-draws", "4", "--steps", "2",
                  "--hidden", "2", *arguments])
        except SystemExit as exit_info:
            assert exit_info.code == 2
            assert "error" in capsys.readouterr().err
            assert not out.exists()
            return
        assert {p.name for p in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "predictive.png"}


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_non_finite_or_non_positive_learning_rates_are_refused(value, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--quiet", "--out", str(tmp_path / "r"), "--lr", value, "--steps", "2"])
    assert "lr must be a positive number" in capsys.readouterr().err
