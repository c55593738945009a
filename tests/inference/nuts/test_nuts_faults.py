"""NUTS faults lose only their own draws: a failing chain leaves the others, Ctrl-C keeps what was sampled."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import IncompleteSamplingWarning
from bnn.inference.nuts import chains
from bnn.inference.nuts.engines import ENGINES
from bnn.models import BayesianMLP

from bnn.cli.main import main
from tests.support.interrupts import interrupt_at_report

pytestmark = pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # short runs

NUM_WARMUP, NUM_SAMPLES = 30, 40
ROOT = Path(__file__).resolve().parents[3]


def quick(conjugate, **options):
    settings = dict(num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES, num_chains=3, chain_method="sequential",
                    max_tree_depth=4, progress=False, jit_compile=False, engine="nutpie", seed=5)
    return fit(conjugate.model, (conjugate.x, conjugate.y), "nuts", **{**settings, **options})


@pytest.fixture(scope="module")
def complete(conjugate):
    return {engine: quick(conjugate, engine=engine) for engine in ("nutpie", "pyro")}


def chains_fail(monkeypatch, failing: set[int]) -> None:
    """Every engine raises ``RuntimeError("chain c broke")`` for each chain ``c`` in ``failing``."""

    def failing_engine(run_chain):
        def run(model, x, y, job, report):
            if job.chain in failing:
                raise RuntimeError(f"chain {job.chain} broke")
            return run_chain(model, x, y, job, report)

        return run

    for kind, run_chain in list(ENGINES.items()):
        monkeypatch.setitem(ENGINES, kind, failing_engine(run_chain))


@pytest.mark.long
def test_a_failing_chain_loses_only_its_own_draws(conjugate, complete, monkeypatch):
    chains_fail(monkeypatch, {1})
    with pytest.warns(IncompleteSamplingWarning, match=r"chain 1 failed \(RuntimeError: chain 1 broke\)"):
        posterior = quick(conjugate)
    assert posterior.record.failed_chains == {"1": "RuntimeError: chain 1 broke"}
    assert posterior.record.chains_kept == [0, 2] and not posterior.record.incomplete
    reference = complete["nutpie"]
    for site, value in reference.samples.items():
        assert torch.equal(posterior.samples[site], value[[0, 2]]), site
    assert posterior.sample_stats["n_steps"].shape == (2, NUM_SAMPLES)


def test_when_every_chain_fails_the_first_chains_error_is_raised(conjugate, monkeypatch):
    chains_fail(monkeypatch, {0, 1, 2})
    with pytest.raises(RuntimeError, match="^chain 0 broke$"):
        quick(conjugate)


@pytest.mark.long
def test_ctrl_c_keeps_the_draws_the_running_nutpie_chain_made(conjugate, complete, monkeypatch):
    interrupt_at_report(monkeypatch, NUM_WARMUP + 10)  # chain 0, after its 10th draw
    with pytest.warns(IncompleteSamplingWarning, match=r"interrupted \(KeyboardInterrupt\); kept chains \[0\]"):
        posterior = quick(conjugate)
    kept = posterior.num_draws
    assert 10 <= kept <= NUM_SAMPLES and posterior.num_chains == 1
    assert posterior.record.incomplete is True and posterior.record.chains_kept == [0]
    assert posterior.record.incomplete_reason.endswith(f"with {kept} of {NUM_SAMPLES} draws each")
    for site, value in complete["nutpie"].samples.items():  # the same draws as the run never stopped, so far
        assert torch.equal(posterior.samples[site][0], value[0, :kept]), site


@pytest.mark.long
def test_ctrl_c_keeps_the_chains_the_pyro_engine_finished(conjugate, complete, monkeypatch):
    interrupt_at_report(monkeypatch, NUM_WARMUP + NUM_SAMPLES + 5)  # in chain 1's warmup
    with pytest.warns(IncompleteSamplingWarning, match=f"kept chains \\[0\\] with {NUM_SAMPLES} of {NUM_SAMPLES}"):
        posterior = quick(conjugate, engine="pyro")
    assert posterior.record.incomplete is True and posterior.num_chains == 1
    for site, value in complete["pyro"].samples.items():
        assert torch.equal(posterior.samples[site][0], value[0]), site


def test_ctrl_c_before_any_draw_stops_the_fit(conjugate, monkeypatch):
    interrupt_at_report(monkeypatch, 5)  # warmup of chain 0 (Pyro reports each iteration as it ends; nutpie runs ahead)
    with pytest.raises(KeyboardInterrupt):
        quick(conjugate, engine="pyro")


class FailsForOneSeed(BayesianMLP):
    """A model that raises, after touching ``marker``, in the chain seeded ``bad_seed`` (importable, so it
    reaches worker processes)."""

    bad_seed: int
    marker: Path

    def __call__(self, *args, **kwargs):
        if torch.initial_seed() == self.bad_seed:
            self.marker.touch()
            raise RuntimeError("this chain's model broke")
        return super().__call__(*args, **kwargs)


@pytest.mark.subprocess
@pytest.mark.skipif(chains.available_cores() < 2, reason="needs two cores to run two chains at once")
def test_in_processes_a_failing_chain_and_ctrl_c_keep_the_other_chains_draws(conjugate, complete, monkeypatch, tmp_path):
    model = FailsForOneSeed.from_config(conjugate.model.config())
    model.bad_seed, model.marker = complete["nutpie"].record.chain_seeds[1], tmp_path / "chain 1 failed"
    events = interrupt_at_report(monkeypatch, NUM_WARMUP + 10, when=model.marker.exists)  # chain 0, once chain 1 failed
    with pytest.warns(IncompleteSamplingWarning) as warned:
        posterior = fit(model, (conjugate.x, conjugate.y), "nuts", num_warmup=NUM_WARMUP, num_samples=5000, num_chains=2,
                        chain_method="parallel", max_tree_depth=4, progress=False, jit_compile=False, engine="nutpie", seed=5)
    message = str(warned[0].message)
    assert "chain 1 failed (RuntimeError: this chain's model broke" in message and "interrupted" in message
    assert posterior.record.failed_chains["1"].startswith("RuntimeError: this chain's model broke")
    assert posterior.record.incomplete is True and posterior.record.chains_kept == [0]
    assert 10 <= posterior.num_draws < 5000
    assert events == ["sent", "the report was shown"]  # acted on at the next poll, not inside the report


@pytest.mark.long
def test_command_line_marks_an_interrupted_run_incomplete_in_metrics_and_exits_130(monkeypatch, tmp_path, capsys):
    interrupt_at_report(monkeypatch, 20 + 10)
    out = tmp_path / "run"
    with pytest.warns(IncompleteSamplingWarning), pytest.raises(SystemExit) as exit_info:
        main(["fit", "--method", "nuts", "--dataset", "toy1d", "--hidden", "2", "--num-chains", "1", "--num-warmup", "20",
              "--num-samples", "500", "--max-tree-depth", "4", "--quiet", "--out", str(out)])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["incomplete"] is True and metrics["incomplete_reason"].startswith("interrupted (KeyboardInterrupt)")
    assert exit_info.value.code == 130
    message = capsys.readouterr().err
    assert message.startswith("interrupted: nuts interrupted (KeyboardInterrupt); kept chains [0] with ")
    assert message.endswith(f"{out} holds what it kept, marked incomplete in metrics.json\n") and message.count("\n") == 1


@pytest.mark.long
def test_compare_stops_at_an_interrupted_fit_and_exits_130(monkeypatch, tmp_path, capsys):
    interrupt_at_report(monkeypatch, 20 + 10)
    out = tmp_path / "report"
    with pytest.warns(IncompleteSamplingWarning), pytest.raises(SystemExit) as exit_info:
        main(["compare", "--methods", "nuts,laplace", "--dataset", "toy1d", "--hidden", "2", "--num-chains", "1",
              "--num-warmup", "20", "--num-samples", "500", "--max-tree-depth", "4", "--quiet", "--out", str(out)])
    assert exit_info.value.code == 130 and not out.exists()  # Laplace did not start, no report was written
    err = capsys.readouterr().err
    assert err.startswith("interrupted: compare stopped (nuts: interrupted (KeyboardInterrupt); kept chains [0] with ")
    assert err.endswith("before any fit finished; nothing was kept\n")


SAMPLING_RUN = """
import json, sys, torch
from bnn.inference import fit
from bnn.inference.nuts import chains
from tests.support.conjugate import conjugate_problem

torch.set_default_dtype(torch.float64)
problem, show, reports = conjugate_problem(), chains._ProgressBars.__call__, []

def announcing(self, message):  # tell the test once chain 0 has 10 draws
    show(self, message)
    reports.append(message)
    if sum(chain == 0 and stage == "Sample" for chain, stage, _ in reports) == 10:
        print("sampling", flush=True)

chains._ProgressBars.__call__ = announcing
posterior = fit(problem.model, (problem.x, problem.y), "nuts", num_warmup=30, num_samples=100_000, num_chains=int(sys.argv[1]),
                chain_method=sys.argv[2], max_tree_depth=4, progress=False, jit_compile=False, engine="nutpie", seed=5)
record = posterior.record
print(json.dumps({"draws": posterior.num_draws, "incomplete": record.incomplete, "incomplete_reason": record.incomplete_reason}))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("num_chains, chain_method", [
    ("1", "sequential"),
    # slow: the same stop in worker processes costs a process that starts two more; make test keeps SIGTERM in sequence
    # here and Ctrl-C (the stop SIGTERM becomes) in processes in test_in_processes_a_failing_chain_and_ctrl_c_...
    pytest.param("2", "parallel", marks=[pytest.mark.slow,
                                         pytest.mark.skipif(chains.available_cores() < 2, reason="needs two cores")]),
])
def test_sigterm_keeps_the_draws_made_like_ctrl_c(num_chains, chain_method):
    process = subprocess.Popen([sys.executable, "-c", SAMPLING_RUN, num_chains, chain_method], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        announced = process.stdout.readline()
        assert announced == "sampling\n", process.communicate(timeout=60)[1]
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["incomplete"] is True and result["incomplete_reason"].startswith("interrupted (KeyboardInterrupt: SIGTERM)")
    assert 10 <= result["draws"] < 100_000


SLOW_RUN = """
import sys, torch
from pathlib import Path
from bnn.inference import fit
from bnn.inference.nuts import chains
from tests.support.conjugate import conjugate_problem
from tests.support.slow_model import SlowOnceMarked

torch.set_default_dtype(torch.float64)
problem, show = conjugate_problem(), chains._ProgressBars.__call__

def announcing(self, message):  # tell the test once an iteration is done
    show(self, message)
    print("sampling", flush=True)

chains._ProgressBars.__call__ = announcing
model = SlowOnceMarked.from_config(problem.model.config())
model.marker = Path(sys.argv[1])
fit(model, (problem.x, problem.y), "nuts", num_warmup=100, num_samples=100, num_chains=2, chain_method="parallel",
    max_tree_depth=4, progress=False, jit_compile=False, engine="pyro", seed=5)
"""


@pytest.mark.slow  # 45 s: two workers start, import and compile
@pytest.mark.skipif(chains.available_cores() < 2, reason="needs two cores to run two chains at once")
def test_sigterm_acts_within_seconds_when_an_iteration_takes_longer(tmp_path):
    marker = tmp_path / "slow"
    process = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(marker)], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        announced = process.stdout.readline()
        assert announced == "sampling\n", process.communicate(timeout=60)[1]
        marker.touch()  # from now on each gradient takes SLOW_SECONDS
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        stdout, stderr = process.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        process.kill()
    assert took < chains.STOP_GRACE_SECONDS + 5, f"SIGTERM took {took:.1f} s to end the run"
    assert "KeyboardInterrupt: SIGTERM\n" in stderr, stderr  # no draw after warmup yet: nothing to keep
