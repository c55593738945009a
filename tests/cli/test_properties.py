"""Property-based tests of the command line: any option values give a run or a clean exit 2 with a message.

The clean-error contract: exit status 2, and on stderr nothing but argparse's usage block (for its own
errors) and one line ``error: ...``; no traceback, no warning, and ``--out`` is left as it was (except
for a fit stopped by a non-finite ELBO, which keeps its posterior there and says so).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from bnn.cli.main import main
from bnn.runtime.atomic import MARKER

NUMBERS = st.one_of(st.integers(-3, 4).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str),
                    st.sampled_from(["", "abc", "1e400", "-0", "0x10", "1e38"]))


def valid_or_hostile(*valid: str, hostile=NUMBERS):
    """A good value of an option (half the time) or a hostile one."""
    return st.one_of(st.sampled_from(valid), hostile)


VALUES = {
    "--steps": valid_or_hostile("1", "3"), "--epochs": valid_or_hostile("1", "2"),
    "--lr": valid_or_hostile("0.001", "0.05", "1e30"), "--batch-size": valid_or_hostile("5", "20"),
    "--seed": valid_or_hostile("0", "7"), "--num-samples": valid_or_hostile("1", "3"),
    "--num-particles": valid_or_hostile("1", "2"),
    "--hidden": valid_or_hostile("1,2", "3", hostile=st.one_of(
        NUMBERS, st.lists(st.integers(-1, 3), max_size=3).map(lambda w: ",".join(map(str, w))))),
    "--noise": valid_or_hostile("0.5", "learned"),
    "--prior-option": valid_or_hostile("scale=2", "fan_in_scaling=true", hostile=st.sampled_from(
        ["scale=0", "scale=-1", "scale=nan", "sd=1", "scale", "scale=true", "fan_in_scaling=maybe"])),
    "--activation": valid_or_hostile("tanh", "relu", hostile=st.just("swish")),
    "--guide": valid_or_hostile("autonormal", "meanfield", "empirical-bayes", hostile=st.just("flat")),
    "--guide-option": valid_or_hostile("init_scale=0.01", "init_loc=median", "init_rho=-4", hostile=st.sampled_from(
        ["init_scale=0", "init_scale=true", "init_loc=zzz", "init_rho=nan", "foo=1", "init_scale"])),
    "--lr-schedule": valid_or_hostile("constant", "exponential", "cosine", hostile=st.just("linear")),
}
"""Each option's values: good ones and hostile ones (not numbers, out of range, unknown names)."""
OPTIONS = st.lists(st.sampled_from(sorted(VALUES)), max_size=3, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({key: VALUES[key] for key in keys}))
"""Up to three options at once, so that runs with only good values are common."""
BUDGET = {"svi": ["--steps", "2", "--num-samples", "4"], "laplace": ["--map-steps", "3", "--num-samples", "4"]}
"""A tiny run of each method (NUTS is left out: even a short run takes seconds)."""
FILES = {"svi": {"metrics.json", "posterior.nc", "fit.json", "predictive.png", MARKER},
         "laplace": {"metrics.json", "posterior.nc", "fit.json", "predictive.png", "linearization.pt", MARKER}}


def run_cli(arguments: list[str], capsys) -> tuple[int, str]:
    """Exit status and stderr of ``bnn fit`` with ``arguments`` (after fixed ones)."""
    try:
        code = main(["fit", "--dataset", "toy1d", "--quiet", "--hidden", "2", *arguments])
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


def clean_error(err: str) -> str:
    """The message of a clean error on stderr (see the module docstring); fails on anything else."""
    assert "Traceback" not in err and "Warning" not in err
    *usage, message = err.rstrip("\n").split("\n")
    assert all(line.startswith(("usage: ", " ")) for line in usage), err  # argparse's usage block only
    assert re.fullmatch(r"(bnn fit: )?error: \S.*", message), err
    return message


@pytest.mark.long
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=OPTIONS, method=st.sampled_from(["svi", "svi", "laplace"]), out_is_file=st.booleans())
@example(options={"--lr": "1e38"}, method="svi", out_is_file=False)
@example(options={"--lr": "1e30"}, method="svi", out_is_file=False)
@example(options={"--lr": "3.5e37", "--lr-schedule": "cosine"}, method="svi", out_is_file=False)
@example(options={}, method="svi", out_is_file=True)
@example(options={"--guide": "meanfield", "--epochs": "2"}, method="svi", out_is_file=False)
@example(options={}, method="laplace", out_is_file=False)
def test_options_end_in_a_fit_or_a_clean_error(options, method, out_is_file, capsys):
    arguments = [item for key, value in options.items() for item in (key, value)]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        if out_is_file:
            out.write_text("keep me")
        code, err = run_cli(["--method", method, "--out", str(out), *BUDGET[method], *arguments], capsys)
        event(f"{method}: {'fit' if code == 0 else 'exit 2'}")
        if code != 0:
            assert code == 2
            message = clean_error(err)
            if out_is_file:
                assert out.read_text() == "keep me"
            elif "no posterior is kept" in message:  # stopped where no likelihood can be built on the draws
                assert not (out / "metrics.json").exists()
            elif "SVI stopped at step" in message:  # the stopped fit's posterior is the result, marked as stopped
                assert str(out) in message and "stopped" in json.loads((out / "metrics.json").read_text())
            else:
                assert not out.exists()
            return
        assert not out_is_file
        assert {p.name for p in out.iterdir()} == FILES[method]
        assert json.loads((out / "metrics.json").read_text())["method"] == method


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--lr", "1e38"], r"error: lr 1e\+38 is above 3.403e\+37, the largest rate whose first Adam step"),
        (["--lr", "3.5e37", "--lr-schedule", "cosine"], r"error: lr 3.5e\+37 is above 3.403e\+37"),
        (["--lr", "nan"], "error: lr must be a positive number, got nan"),
        (["--lr", "inf"], "error: lr must be a positive number, got inf"),
        (["--lr", "-1"], "error: lr must be a positive number, got -1.0"),
        (["--lr", "0"], "error: lr must be a positive number, got 0.0"),
        (["--prior-option", "fan_in_scaling=maybe"], "error: GaussianPrior: fan_in_scaling must be True or False"),
        (["--prior-option", "scale=true"], "error: GaussianPrior: scale must be a positive finite number, got True"),
        (["--guide", "autonormal", "--guide-option", "init_loc=zzz"], r"error: init_loc must be one of \['median', 'prior'\]"),
        (["--guide", "autonormal", "--guide-option", "init_scale=true"], "error: init_scale must be a positive number, got True"),
        (["--lr-schedule", "linear"], "error: argument --lr-schedule: invalid choice: 'linear'"),
    ],
)
def test_bad_values_are_refused_by_name(arguments, message, tmp_path, capsys):
    code, err = run_cli(["--out", str(tmp_path / "r"), "--steps", "2", *arguments], capsys)
    assert code == 2 and re.search(message, clean_error(err))
    assert not (tmp_path / "r").exists()


def test_an_out_path_through_a_file_is_refused_and_the_file_kept(tmp_path, capsys):
    (tmp_path / "taken").write_text("keep me")
    for out in (tmp_path / "taken", tmp_path / "taken" / "run"):
        code, err = run_cli(["--out", str(out), "--steps", "2"], capsys)
        assert code == 2 and f"error: {tmp_path / 'taken'} is a file, not a folder" in clean_error(err)
    assert (tmp_path / "taken").read_text() == "keep me"
