"""SVI checkpoints: a run killed (SIGTERM, SIGKILL) or stopped by Ctrl-C resumes to exactly the numbers of a run
never stopped; checkpoints load with ``weights_only=True``; resuming refuses what is not this fit's checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE, FORMAT, SCHEMA_VERSION
from bnn.models import BayesianMLP

from bnn.cli.main import main
from bnn.runtime.atomic import MARKER
from tests.support.interrupts import signal_at_step
from tests.support.svi_run import CHECKPOINT_EVERY, STEPS, run

ROOT = Path(__file__).resolve().parents[3]
SMALL_STEPS = 30


@pytest.fixture
def one_thread():
    """The subprocess runs use one torch thread: so does the comparison here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def uninterrupted():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run()
    finally:
        torch.set_num_threads(threads)


def small_fit(hidden: int = 5, **options) -> Posterior:
    model = BayesianMLP(1, 1, hidden=(hidden,), likelihood={"name": "gaussian", "scale": None})
    settings = {"steps": SMALL_STEPS, "num_samples": 5, "seed": 2, "progress": False, **options}
    return fit(model, load_toy1d(n_train=40, n_test=10), "svi", **settings)


def parameters(posterior: Posterior) -> list[torch.Tensor]:
    return [value.detach() for value in posterior.extras["param_state"]["params"].values()]


def assert_same_fit(resumed: Posterior, reference: Posterior) -> None:
    assert resumed.record.elbo == reference.record.elbo
    for a, b in zip(parameters(resumed), parameters(reference), strict=True):
        assert torch.equal(a, b)
    for name, value in reference.samples.items():
        assert torch.equal(resumed.samples[name], value), name


@pytest.mark.subprocess
@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_run_resumes_to_the_numbers_of_an_uninterrupted_one(kill, uninterrupted, one_thread, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "tests.support.svi_run", str(tmp_path)], cwd=ROOT,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / CHECKPOINT_FILE).exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint within two minutes"
        time.sleep(0.005)
    process.send_signal(kill)
    stderr = process.communicate(timeout=120)[1]
    state = torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)
    assert 0 < state["step"] < STEPS, "the run ended before the signal came"
    if kill == signal.SIGTERM:  # stops after the step it is in, with a checkpoint of that step
        assert process.returncode == -signal.SIGINT  # Python's status for an uncaught KeyboardInterrupt
        assert state["reason"] == "stopped by SIGTERM"
        assert f"SVI stopped by SIGTERM after step {state['step']} of {STEPS}" in stderr
        assert f"--resume {tmp_path}" in stderr
    else:  # dies at once: the last periodic checkpoint is whole
        assert process.returncode == -signal.SIGKILL
        assert state["reason"] == "periodic" and state["step"] % CHECKPOINT_EVERY == 0
    assert len(state["elbo"]) == state["step"] and state["elbo"] == uninterrupted.record.elbo[: state["step"]]
    resumed = run(resume=tmp_path)
    assert resumed.record.resumed_from_step == state["step"]
    assert_same_fit(resumed, uninterrupted)


CONFIGS = {
    "autonormal, minibatches, cosine rate, Blundell KL": dict(batch_size=10, lr_schedule="cosine", kl_weighting="blundell"),
    "meanfield, JIT, two particles": dict(guide="meanfield", jit=True, num_particles=2),
    "meanfield started at the MAP, minibatches": dict(guide="meanfield", guide_options={"init_loc": "map"}, batch_size=10),
}


@pytest.mark.long
@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("options", CONFIGS.values(), ids=CONFIGS)
def test_ctrl_c_ends_the_fit_after_its_step_with_a_checkpoint_that_resumes_exactly(options, monkeypatch, tmp_path):
    reference = small_fit(**options)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal_at_step(monkeypatch, 13)
    with pytest.raises(KeyboardInterrupt, match=rf"SVI stopped by SIGINT after step 13 of {SMALL_STEPS}; .* resume="):
        small_fit(checkpoint_dir=tmp_path, checkpoint_every=5, **options)
    monkeypatch.undo()
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    state = torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)
    assert state["step"] == 13 and state["reason"] == "stopped by SIGINT"
    assert_same_fit(small_fit(resume=tmp_path, **options), reference)


def test_a_checkpoint_holds_the_fit_state_in_types_that_load_without_code(tmp_path):
    posterior = small_fit(checkpoint_dir=tmp_path, checkpoint_every=10, lr_schedule="cosine")
    state = torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)
    assert (state["format"], state["schema_version"], state["reason"], state["step"]) == (FORMAT, SCHEMA_VERSION,
                                                                                           "finished", SMALL_STEPS)
    assert state["elbo"] == posterior.record.elbo
    assert state["rng"].dtype == torch.uint8 and state["permutation"].tolist() == list(range(40))
    for saved, fitted in zip(state["params"].values(), parameters(posterior), strict=True):
        assert torch.equal(saved, fitted)
    assert set(state["optimiser"]) == set(state["params"])
    assert all(set(per_parameter) == {"scheduler", "optimizer"} for per_parameter in state["optimiser"].values())
    fingerprint = json.loads(state["fit"])
    assert fingerprint["model"]["hidden"] == [5] and fingerprint["guide"] == "meanfield"
    assert fingerprint["options"]["lr_schedule"] == "cosine" and fingerprint["options"]["steps"] == SMALL_STEPS
    again = small_fit(resume=tmp_path, lr_schedule="cosine")  # a finished run resumes to its own posterior
    assert again.record.resumed_from_step == SMALL_STEPS
    assert_same_fit(again, posterior)


@pytest.fixture(scope="module")
def checkpoint_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("written")
    small_fit(checkpoint_dir=folder)
    return folder


def _damage(folder: Path) -> None:
    (folder / CHECKPOINT_FILE).write_bytes((folder / CHECKPOINT_FILE).read_bytes()[:200])


def _old_schema(folder: Path) -> None:
    state = torch.load(folder / CHECKPOINT_FILE, weights_only=True)
    torch.save({**state, "schema_version": 0}, folder / CHECKPOINT_FILE)


def _other_parameters(folder: Path) -> None:
    state = torch.load(folder / CHECKPOINT_FILE, weights_only=True)
    torch.save({**state, "params": dict(list(state["params"].items())[:-1])}, folder / CHECKPOINT_FILE)


def _foreign(folder: Path) -> None:
    (folder / CHECKPOINT_FILE).unlink()
    (folder / "notes.txt").write_text("not a checkpoint")


@pytest.mark.parametrize(
    "change, options, message",
    [
        (None, dict(hidden=6), r"was written by another fit; .* model\.hidden: checkpoint \[5\], this fit \[6\]"),
        (None, dict(lr=0.02), r"options\.lr: checkpoint 0\.01, this fit 0\.02"),
        (None, dict(seed=3), r"options\.seed: checkpoint 2, this fit 3"),
        (_damage, {}, r"cannot be read \(.*\); it is damaged or not a checkpoint"),
        (_old_schema, {}, "has schema version 0; this version reads 1"),
        (_other_parameters, {}, r"the checkpoint's guide parameters \{.*\} are not this guide's \{.*\}"),
        (_foreign, {}, "is not an SVI checkpoint folder: svi-checkpoint.pt is missing"),
    ],
    ids=["other model", "other learning rate", "other seed", "damaged file", "old schema", "other parameters",
         "foreign folder"],
)
def test_resume_refuses_what_is_not_this_fits_checkpoint(change, options, message, checkpoint_folder, tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / CHECKPOINT_FILE).write_bytes((checkpoint_folder / CHECKPOINT_FILE).read_bytes())
    if change is not None:
        change(folder)
    with pytest.raises(ValueError, match=message):
        small_fit(resume=folder, **options)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(resume="no/such/folder"), "cannot resume from no/such/folder: no such folder"),
        (dict(checkpoint_every=5), r"checkpoint_every needs checkpoint_dir \(or resume\)"),
        (dict(checkpoint_dir="x", checkpoint_every=0), "checkpoint_every must be a positive integer, got 0"),
    ],
)
def test_bad_checkpoint_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        small_fit(**options)


def test_a_folder_with_another_fits_checkpoint_is_not_overwritten(checkpoint_folder):
    before = (checkpoint_folder / CHECKPOINT_FILE).read_bytes()
    with pytest.raises(ValueError, match="already holds an SVI checkpoint; continue it with resume="):
        small_fit(checkpoint_dir=checkpoint_folder)
    assert (checkpoint_folder / CHECKPOINT_FILE).read_bytes() == before


@pytest.mark.long
def test_command_line_checkpoints_inside_the_out_folder_and_resumes(monkeypatch, tmp_path, capsys):
    arguments = ["fit", "--dataset", "toy1d", "--hidden", "3", "--steps", "40", "--num-samples", "5", "--quiet"]
    main([*arguments, "--out", str(tmp_path / "reference")])
    out = tmp_path / "run"
    signal_at_step(monkeypatch, 25)
    with pytest.raises(SystemExit) as exit_info:  # Ctrl-C: exit status 130 and one line saying how to resume
        main([*arguments, "--checkpoint-every", "10", "--out", str(out)])
    assert exit_info.value.code == 130 and f"--resume {out / 'checkpoint'}" in capsys.readouterr().err
    monkeypatch.undo()
    assert {path.name for path in out.iterdir()} == {"checkpoint", MARKER}  # no half-written result
    main([*arguments, "--resume", str(out / "checkpoint"), "--out", str(out)])
    assert {path.name for path in out.iterdir()} == {"metrics.json", "posterior.nc", "fit.json", "predictive.png", MARKER}
    resumed, reference = Posterior.load(out), Posterior.load(tmp_path / "reference")
    assert resumed.record.elbo == reference.record.elbo and resumed.record.resumed_from_step == 25
    for name, value in reference.samples.items():
        assert torch.equal(resumed.samples[name], value), name
