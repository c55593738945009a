"""Deep ensembles: M independent MAP fits, one draw each, the same in processes and in sequence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.guides.flat_weights import split_flat
from bnn.inference import Posterior, fit
from bnn.inference.core.record import read_record
from bnn.inference.ensemble import EnsembleRecord, IncompleteEnsembleWarning, fit_ensemble
from bnn.inference.ensemble import fit as ensemble_fit
from bnn.inference.evaluation.compare import compare
from bnn.inference.map_search import map_starts
from bnn.inference.map_search.map_estimate import find_map
from bnn.models import BayesianMLP

from bnn.cli.main import main
from bnn.runtime.seeding import seeded

ROOT = Path(__file__).resolve().parents[3]
X = torch.linspace(-1, 1, 20).unsqueeze(-1)
Y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(20, generator=torch.Generator().manual_seed(0))
QUICK = dict(map_steps=100, map_tolerance=1.0, progress=False)  # a loose polish: seconds, not minutes


def small_model(**kwargs) -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(4,), likelihood=kwargs.pop("likelihood", {"name": "gaussian", "scale": None}), **kwargs)


@pytest.fixture(scope="module")
def sequential() -> Posterior:
    return fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="sequential", seed=1, **QUICK)


def all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def parent_of(pid: int) -> int | None:
    try:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def command_of(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, counts as gone)."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def workers_of(parent: int) -> list[int]:
    """The live processes ``parent`` started, but for the resource trackers of loky and multiprocessing (one per
    process, for its life)."""
    return [pid for pid in all_pids()
            if parent_of(pid) == parent and alive(pid) and "resource_tracker" not in command_of(pid)]


@pytest.mark.long
def test_each_member_is_one_draw_of_its_own_map_fit(sequential):
    assert sequential.num_chains == 1 and sequential.num_draws == 3
    assert sequential.samples["layers.0.weight"].shape == (1, 3, 4, 1) and sequential.samples["sigma"].shape == (1, 3)
    record = sequential.record
    assert record.members_kept == [0, 1, 2] and record.member_method == "sequential" and len(set(record.member_seeds)) == 3
    weights = sequential.samples["layers.0.weight"][0]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[1], weights[2])
    # member 1 is find_map from its own seed, in float64, its noise the maximum-likelihood value there
    with seeded(record.member_seeds[1]):
        same = find_map(small_model(), X.double(), Y.double(), steps=100, lr=0.01, tolerance=1.0, progress=False)
    for name, value in split_flat(small_model().sites, same.theta.float()).items():
        torch.testing.assert_close(sequential.samples[name][0, 1], value)
    torch.testing.assert_close(sequential.samples["sigma"][0, 1], same.latents["sigma"].float())
    assert record.noise == pytest.approx(sequential.samples["sigma"][0].tolist())


@pytest.mark.long
def test_the_same_seed_gives_the_same_members_and_another_seed_others(sequential):
    again = fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="sequential", seed=1, **QUICK)
    other = fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="sequential", seed=2, **QUICK)
    for name in sequential.samples:
        assert torch.equal(again.samples[name], sequential.samples[name]), name
    assert not set(other.record.member_seeds) & set(sequential.record.member_seeds)
    for member in range(3):
        assert not torch.equal(other.samples["layers.0.weight"][0, member], sequential.samples["layers.0.weight"][0, member])


@pytest.mark.subprocess
def test_processes_give_the_same_members_as_the_sequence_and_end_with_the_fit(sequential):
    parallel = fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="parallel", seed=1, **QUICK)
    assert parallel.record.member_method == "parallel"
    for name in sequential.samples:
        assert torch.equal(parallel.samples[name], sequential.samples[name]), name
    assert workers_of(os.getpid()) == []


@pytest.mark.parametrize("prior", ["laplace", "scale-mixture"])
def test_any_prior_of_the_model_is_the_map_fits_prior(prior):
    posterior = fit_ensemble(small_model(prior=prior), X, Y, num_members=2, member_method="sequential", **QUICK)
    assert all(torch.isfinite(value).all() for value in posterior.samples.values())


def test_a_heteroscedastic_ensemble_predicts_a_mean_and_a_scale_per_input():
    model = BayesianMLP(1, 2, hidden=(4,), likelihood="heteroscedastic-gaussian")
    posterior = fit(model, (X, Y), "ensemble", num_members=2, member_method="sequential", **QUICK)
    assert posterior.samples["layers.1.weight"].shape == (1, 2, 2, 4) and "sigma" not in posterior.samples
    assert posterior.record.noise is None and posterior.predict(X).std.shape == (20,)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(num_members=1), "num_members must be an integer >= 2, got 1"),
        (dict(num_members=2.0), "num_members must be an integer >= 2"),
        (dict(member_method="threads"), r"unknown member_method 'threads'; choose from \['auto', 'parallel', 'sequential'\]"),
        (dict(map_steps=0), "map_steps must be a positive integer"),
        (dict(map_lr=float("nan")), "map_lr must be a positive number"),
        (dict(map_tolerance=0), "map_tolerance must be a positive number"),
        (dict(seed=True), "seed must be a non-negative integer"),
        (dict(num_samples=5), r"method 'ensemble' takes no option\(s\) \['num_samples'\]"),
    ],
)
def test_bad_options_are_refused_before_any_work(options, message, monkeypatch):
    monkeypatch.setattr(ensemble_fit, "run_members", lambda *args: pytest.fail("work started"))
    with pytest.raises(ValueError, match=message):
        fit(small_model(), (X, Y), "ensemble", **options)


def interrupt_member(monkeypatch, member: int, error: BaseException) -> None:
    """``fit_member`` raises ``error`` for ``member`` (in this process: sequential members)."""
    fit_member = map_starts.fit_member

    def failing(model, x, y, job):
        if job.member == member:
            raise error
        return fit_member(model, x, y, job)

    monkeypatch.setattr(map_starts, "fit_member", failing)


def test_ctrl_c_keeps_the_members_finished_marked_incomplete(monkeypatch):
    interrupt_member(monkeypatch, 2, KeyboardInterrupt())
    with pytest.warns(IncompleteEnsembleWarning, match=r"interrupted \(KeyboardInterrupt\); kept members \[0, 1\] of 4"):
        posterior = fit(small_model(), (X, Y), "ensemble", num_members=4, member_method="sequential", **QUICK)
    assert posterior.num_draws == 2 and posterior.record.incomplete and posterior.record.members_kept == [0, 1]
    assert posterior.record.metrics()["incomplete"] is True


def test_ctrl_c_before_any_member_finished_raises_it_again(monkeypatch):
    interrupt_member(monkeypatch, 0, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        fit(small_model(), (X, Y), "ensemble", num_members=2, member_method="sequential", **QUICK)


def test_a_failed_member_loses_only_itself(monkeypatch):
    interrupt_member(monkeypatch, 1, RuntimeError("this member broke"))
    with pytest.warns(IncompleteEnsembleWarning, match=r"member 1 failed \(RuntimeError: this member broke\)"):
        posterior = fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="sequential", **QUICK)
    assert posterior.record.members_kept == [0, 2] and posterior.record.failed_members == {"1": "RuntimeError: this member broke"}
    assert not posterior.record.incomplete


@pytest.mark.slow  # starts worker processes: about 10 s on two busy cores
def test_ctrl_c_in_processes_keeps_the_finished_members_and_ends_the_workers(monkeypatch):
    wait, sent = map_starts.first_finished, []

    def ctrl_c_after_one(pending):
        finished, pending = wait(pending)
        if finished and not sent:
            sent.append("sent")
            signal.raise_signal(signal.SIGINT)
            sent.append("the wait returned")  # acted on after the wait, not inside it
        return finished, pending

    monkeypatch.setattr(map_starts, "first_finished", ctrl_c_after_one)
    with pytest.warns(IncompleteEnsembleWarning, match="interrupted"):
        posterior = fit(small_model(), (X, Y), "ensemble", num_members=3, member_method="parallel", **QUICK)
    assert 1 <= posterior.num_draws < 3 and posterior.record.incomplete
    assert workers_of(os.getpid()) == [] and sent == ["sent", "the wait returned"]


def test_the_record_survives_json_and_save_load(sequential, tmp_path):
    record = read_record(sequential.record.to_json())
    assert isinstance(record, EnsembleRecord) and record == sequential.record and record.converged
    loaded = Posterior.load(sequential.save(tmp_path / "fit"))
    assert loaded.record == sequential.record and torch.equal(loaded.samples["sigma"], sequential.samples["sigma"])


def test_compare_has_a_row_for_mc_dropout_and_the_ensemble():
    toy = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    fits = [fit(model, toy, "mc-dropout", steps=50, num_samples=20, progress=False),
            fit(model, toy, "ensemble", num_members=2, member_method="sequential", **QUICK)]
    table = compare(fits, toy)
    assert list(table.index) == ["mc-dropout", "ensemble"] and list(table["method"]) == ["mc-dropout", "ensemble"]
    for column in ("test_rmse", "test_ll", "coverage_90", "loo_elpd", "waic_elpd", "fit_seconds"):
        assert table[column].notna().all(), column


WORKER_RUN = """
import torch
from bnn.inference import fit
from bnn.models import BayesianMLP

if __name__ == "__main__":
    x = torch.linspace(-1, 1, 2000).unsqueeze(-1)
    model = BayesianMLP(1, 1, hidden=(50,))
    print("fitting", flush=True)
    fit(model, (x, torch.sin(3 * x[:, 0])), "ensemble", num_members=2, member_method="parallel", map_steps=10**7,
        progress=False)
"""


@pytest.mark.slow  # starts worker processes: about 10 s on two busy cores
def test_the_workers_end_when_the_parent_is_killed(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(WORKER_RUN)
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline() == "fitting\n", parent.communicate(timeout=60)[1]
        workers = []
        for _ in range(1200):  # the workers start (seconds on a busy machine), then take their member
            workers = workers_of(parent.pid)
            if len(workers) == 2:
                break
            time.sleep(0.05)
        assert len(workers) == 2, [command_of(pid) for pid in all_pids() if parent_of(pid) == parent.pid]
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 60  # a worker still importing finds its parent gone once its initializer runs
        while time.monotonic() < deadline and any(alive(pid) for pid in workers):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in workers)
    finally:
        parent.kill()
        parent.communicate()


def test_the_record_metrics_name_the_members(sequential):
    metrics = sequential.record.metrics()
    assert metrics["members"] == 3 and metrics["map_converged"] is True
    assert json.loads(json.dumps(metrics)) == metrics


@pytest.mark.long
def test_the_command_line_takes_the_method_and_its_options(tmp_path):
    out = tmp_path / "run"
    main(["fit", "--method", "ensemble", "--num-members", "2", "--member-method", "sequential", "--map-steps", "20",
          "--hidden", "3", "--out", str(out), "--quiet"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "ensemble" and metrics["members"] == 2 and metrics["test_ll"] == metrics["test_ll"]
    assert Posterior.load(out).record.member_method == "sequential"


def test_members_whose_minibatch_map_did_not_flatten_are_named_with_the_minibatch_advice(conjugate):
    """Members fitted on minibatches too short to flatten: the warning and the record name the minibatch fit and what
    to raise, not the polish's tolerance (they had no polish)."""
    with pytest.warns(RuntimeWarning, match=r"the MAP fits of ensemble members \[0, 1\] did not converge: fitted on "
                                            r"minibatches.*raise map_epochs"):
        record = fit(conjugate.model, (conjugate.x, conjugate.y), "ensemble", num_members=2, member_method="sequential",
                     map_batch_size=8, map_epochs=2, map_batch_lr=0.05, seed=0, progress=False).record
    assert record.map_minibatch and record.problems() == [
        "the MAP fits of members [0, 1] did not converge: fitted on minibatches, they stopped before they settled "
        "(an objective still rising, or a full gradient beyond their batches' noise); raise map_epochs (--map-epochs) "
        "or map_batch_lr"]
