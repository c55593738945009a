"""``--out``, ``--overwrite`` and ``--resume`` never lose a result or an input (issue 18's hostile cases)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from bnn.inference import Posterior

from bnn.cli.main import main
from bnn.runtime.atomic import MARKER, result_state

TINY = ["fit", "--dataset", "toy1d", "--hidden", "2", "--steps", "20", "--num-samples", "5", "--quiet"]
# a non-finite ELBO at step 1, a posterior kept
DIVERGING = ["--hidden", "5", "--noise", "0.1", "--guide", "meanfield", "--lr", "1e10"]
# a non-finite ELBO at step 1, no posterior kept: AutoNormal at a constant rate sends the noise's draws to infinity
NO_POSTERIOR = ["--guide", "autonormal", "--lr-schedule", "constant", "--no-jit", "--lr", "1e30", "--num-samples", "1000"]


def exit_status(argv: list[str], capsys) -> tuple[int, str]:
    """The exit status of ``bnn`` with ``argv`` and its stderr."""
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


def uci_folder(tmp_path):
    """A folder standing for ``--uci-dir``: a data set and the user's notes."""
    data = tmp_path / "uci"
    (data / "yacht" / "data").mkdir(parents=True)
    (data / "yacht" / "data" / "data.txt").write_text("1 2 3\n")
    (data / "notes.txt").write_text("mine")
    return data


def test_resume_refuses_an_out_above_the_checkpoint_and_keeps_the_neighbours(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert exit_status([*TINY, *NO_POSTERIOR, "--out", str(runs / "ck")], capsys)[0] == 2  # leaves runs/ck/checkpoint
    (runs / "other").mkdir()
    (runs / "other" / "result.txt").write_text("unrelated")
    for overwrite in ([], ["--overwrite"]):
        code, err = exit_status([*TINY, *NO_POSTERIOR, "--resume", str(runs / "ck" / "checkpoint"), "--out", str(runs),
                                 *overwrite], capsys)
        assert code == 2 and f"--out {runs} contains the --resume folder {runs / 'ck' / 'checkpoint'}" in err
    assert (runs / "other" / "result.txt").read_text() == "unrelated" and (runs / "ck" / "checkpoint").is_dir()


@pytest.mark.parametrize("where", ["the data", "inside the data", "above the data"])
def test_overwrite_never_touches_the_uci_folder(tmp_path, capsys, where):
    data = uci_folder(tmp_path)
    out = {"the data": data, "inside the data": data / "yacht", "above the data": tmp_path}[where]
    code, err = exit_status([*TINY, "--uci-dir", str(data), "--dataset", "yacht", "--overwrite", "--out", str(out)], capsys)
    assert code == 2 and "the --uci-dir folder" in err and "an input that is never replaced" in err
    assert (data / "notes.txt").read_text() == "mine" and (data / "yacht" / "data" / "data.txt").is_file()


@pytest.mark.parametrize("stranger", ["notes.txt", "data.csv"])
def test_overwrite_refuses_a_folder_with_files_we_did_not_write(tmp_path, capsys, stranger):
    out = tmp_path / "mine"
    out.mkdir()
    (out / stranger).write_text("keep")
    code, err = exit_status([*TINY, "--overwrite", "--out", str(out)], capsys)
    assert code == 2 and f"{out} holds files this tool did not write ({stranger}" in err
    assert [p.name for p in out.iterdir()] == [stranger]


def test_overwrite_refuses_a_result_a_user_added_files_to(tmp_path, capsys):
    out = tmp_path / "run"
    assert exit_status([*TINY, "--out", str(out)], capsys)[0] == 0
    (out / "my-notes.md").write_text("keep")
    code, err = exit_status([*TINY, "--overwrite", "--out", str(out)], capsys)
    assert code == 2 and "holds files this tool did not write (.bnn-result.json, fit.json, metrics.json" in err
    assert (out / "my-notes.md").read_text() == "keep"


def test_a_result_names_the_command_that_wrote_it_when_another_would_replace_it(tmp_path, capsys):
    out = tmp_path / "run"
    assert exit_status([*TINY, "--out", str(out)], capsys)[0] == 0
    assert json.loads((out / MARKER).read_text())["writer"] == "bnn fit"
    code, err = exit_status(["compare", "--dataset", "toy1d", "--methods", "map", "--quiet", "--out", str(out)], capsys)
    assert code == 2 and f"{out} holds a result of `bnn fit`; choose another folder or pass" in err
    assert result_state(out) == "complete" and (out / "fit.json").exists()


@pytest.mark.parametrize("folder", ["cwd", "parent of cwd"])
def test_overwrite_refuses_the_current_folder_and_above(tmp_path, capsys, monkeypatch, folder):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    (tmp_path / "work" / "script.py").write_text("print(1)")
    code, err = exit_status([*TINY, "--overwrite", "--out", "." if folder == "cwd" else ".."], capsys)
    assert code == 2 and "is or contains the current folder" in err
    assert (tmp_path / "work" / "script.py").is_file()


@pytest.mark.long
@pytest.mark.filterwarnings("ignore:Encountered NaN:UserWarning")  # pyro on the NaN this test provokes
def test_a_stopped_fit_never_replaces_a_complete_result(tmp_path, capsys):
    out = tmp_path / "run"
    assert exit_status([*TINY, "--out", str(out)], capsys)[0] == 0
    good = (out / "posterior.nc").read_bytes()
    code, err = exit_status([*TINY, *DIVERGING, "--overwrite", "--out", str(out)], capsys)
    beside = tmp_path / "run-stopped"
    assert code == 2 and f"{out} keeps its complete earlier result; this stopped fit" in err and f"is in {beside}" in err
    assert f"{beside / 'checkpoint' / 'svi-checkpoint.pt'} holds its state" in err
    assert (out / "posterior.nc").read_bytes() == good and result_state(out) == "complete"
    assert result_state(beside) == "stopped" and Posterior.load(beside).record.stopped == "non-finite ELBO at step 1"
    assert json.loads((beside / "metrics.json").read_text())["stopped"] == "non-finite ELBO at step 1"
    assert exit_status([*TINY, "--overwrite", "--out", str(out)], capsys)[0] == 0  # the next --overwrite still works


def test_a_run_that_kept_only_a_checkpoint_has_a_working_next_command(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = exit_status([*TINY, *NO_POSTERIOR, "--out", str(out)], capsys)
    assert code == 2 and "no posterior is kept" in err
    assert f"{out} keeps this run's checkpoint beside anything it held before; to start again, run the command with " \
           "the change the hint suggests and --overwrite" in err
    assert result_state(out) == "checkpoint"
    code, err = exit_status([*TINY, "--out", str(out)], capsys)
    assert code == 2 and f"{out} holds the checkpoint of an unfinished run; continue it with the same options and " \
                         f"--resume {out / 'checkpoint'}, or pass --overwrite to start again" in err
    assert exit_status([*TINY, "--overwrite", "--out", str(out)], capsys)[0] == 0
    assert {p.name for p in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "predictive.png", MARKER}


@pytest.mark.parametrize("out", ["/proc/bnn-run", "/proc/self/bnn/run", "/sys/bnn-run"])
def test_an_unwritable_out_is_refused_before_the_fit(out, capsys, monkeypatch):
    from bnn.cli import fit as cli

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit started")

    monkeypatch.setattr(cli, "fit", no_fit)
    code, err = exit_status([*TINY, "--out", out], capsys)
    assert code == 2 and "error: cannot write into /" in err and "choose an --out in a folder you can write" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_parent_is_refused_before_the_fit(tmp_path, capsys):
    (tmp_path / "locked").mkdir(mode=0o555)
    code, err = exit_status([*TINY, "--out", str(tmp_path / "locked" / "run")], capsys)
    assert code == 2 and f"error: cannot write into {tmp_path / 'locked'}" in err


GATED_FIT = """
import sys
from bnn.cli import fit as cli
from bnn.cli.main import main

fit = cli.fit

def gated(*args, **kwargs):  # the fit waits for the test's word on stdin, a second writer being tried meanwhile
    print("fitting", flush=True)
    sys.stdin.readline()
    return fit(*args, **kwargs)

cli.fit = gated
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.subprocess
def test_a_second_fit_of_the_same_out_is_refused_naming_the_first_whose_result_stays(tmp_path, capsys):
    out = tmp_path / "run"
    small = ["fit", "--dataset", "toy1d", "--hidden", "2", "--map-steps", "20", "--quiet"]
    first_argv = [*small, "--method", "ensemble", "--num-members", "2", "--member-method", "sequential", "--out", str(out)]
    first = subprocess.Popen([sys.executable, "-c", GATED_FIT, *first_argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline() == "fitting\n", first.stderr.read()
        # the second writer is this process (another process than the first, as a second command would be): no
        # second interpreter importing torch
        code, err = exit_status([*small, "--method", "map", "--out", str(out)], capsys)
        first.stdin.write("go\n")
        first.stdin.flush()
        printed, errors = first.communicate(timeout=600)
    finally:
        first.kill()
        first.wait()
    assert code == 2 and err.startswith(
        f"error: {out} is being written by pid {first.pid} (`bnn {shlex.join(first_argv)}`, since "), err
    assert "wait for it, or choose another --out" in err
    assert first.returncode == 0, errors
    assert json.loads((out / "metrics.json").read_text())["method"] == "ensemble"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("link", ["dangling", "to a folder", "above"])
def test_a_symbolic_link_out_is_refused_before_the_fit_and_left_as_it_was(tmp_path, capsys, monkeypatch, link):
    from bnn.cli import fit as cli

    monkeypatch.setattr(cli, "fit", lambda *args, **kwargs: pytest.fail("the fit started"))
    (tmp_path / "real").mkdir()
    os.symlink("real" if link == "to a folder" else "nowhere", tmp_path / "link")
    out = tmp_path / "link" / "run" if link == "above" else tmp_path / "link"
    for overwrite in ([], ["--overwrite"]):
        code, err = exit_status([*TINY, "--out", str(out), *overwrite], capsys)
        assert code == 2, err
        assert (f"error: {tmp_path / 'link'} is a symbolic link to nowhere, which does not exist" in err if link != "to a folder"
                else f"error: {out} is a symbolic link (to real): a result is swapped in by renaming" in err)
    assert os.readlink(tmp_path / "link") == ("real" if link == "to a folder" else "nowhere")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"] and not any((tmp_path / "real").iterdir())
