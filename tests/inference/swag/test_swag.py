"""SWAG and MultiSWAG as methods of ``fit``: options checked first, seeded draws from each member's Gaussian around its
MAP, the record, save/load, the command line."""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch
from bnn.datasets import load_dataset
from bnn.inference import Posterior, fit
from bnn.inference.core.record import read_record
from bnn.inference.map_search import map_starts
from bnn.inference.swag import MultiSWAGOptions, MultiSWAGRecord, SWAGOptions, SWAGRecord
from bnn.inference.swag import cost as swag_cost
from bnn.inference.swag import fit as swag_fit
from bnn.models import BayesianMLP

from bnn.cli.main import main

SHORT = dict(map_steps=200, swag_epochs=6, rank=3, batch_size=10, num_samples=7, progress=False,
             member_method="sequential")  # worker processes: one test below


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 30}, "batch_size=30 covers all 30 training rows: full-batch gradient steps do not move from the MAP"),
    ({"batch_size": None}, "batch_size=32 covers all 30 training rows"),  # the default batch, 32 on small data
    ({"swag_epochs": 5, "rank": 6}, "swag_epochs=5 collects 5 iterates, fewer than the rank=6 deviations"),
    ({"rank": 1}, "rank must be an integer >= 2, got 1"),
    ({"swag_lr": 0}, "swag_lr must be a positive number, got 0"),
    ({"step_share": 2.0}, r"step_share must be a finite number in \(0, 2\), got 2.0"),
    ({"num_members": 0}, "num_members must be an integer >= 1, got 0"),
])
def test_bad_options_are_refused_before_any_work(monkeypatch, toy, model, options, message):
    monkeypatch.setattr(swag_fit, "map_starts", lambda *args, **kwargs: pytest.fail("the MAP fits started"))
    with pytest.raises(ValueError, match=message):
        fit(model, toy, "swag", **{**SHORT, **options})


@pytest.mark.parametrize("options", [SWAGOptions, MultiSWAGOptions])
def test_the_default_batch_keeps_an_epoch_to_at_most_32_steps_and_a_given_one_is_kept(options, model):
    default, given = options(), options(batch_size=10)
    rows = [30, 1024, 1025, 7373, 41157]
    assert [default.batch_rows(n) for n in rows] == [32, 32, 33, 231, 1287]
    assert [given.batch_rows(n) for n in rows] == [10] * 5
    # the cost counts the steps of the batch the fit takes: 100 epochs of ceil(41157 / 1287) = 32 steps a member
    members = default.num_members
    steps = swag_cost.count(default, 41157, model).how.rsplit(", ", 1)[1]
    assert steps == f"{members * 100 * 32} steps in all"


@pytest.mark.long
@pytest.mark.parametrize("method, members", [("swag", 1), ("multiswag", 2)])
def test_the_same_seed_gives_the_same_draws_one_chain_per_member(toy, model, method, members):
    first = fit(model, toy, method, seed=3, num_members=members, **SHORT)
    again = fit(model, toy, method, seed=3, num_members=members, **SHORT)
    other = fit(model, toy, method, seed=4, num_members=members, **SHORT)
    for site in model.latent_shapes:
        assert first.samples[site].shape[:2] == (members, 7)
        assert torch.equal(first.samples[site], again.samples[site]), site
        assert not torch.equal(first.samples[site], other.samples[site]), site
    assert (first.samples["sigma"] > 0).all()
    record = first.record
    assert type(record) is (SWAGRecord if method == "swag" else MultiSWAGRecord)
    assert record.sgd_steps == 6 * 3 and record.collected == 6 and record.batch_size == 10
    assert len(record.map_converged) == members and record.converged == all(record.map_converged)
    if members == 2:  # each member from its own MAP: their draws differ
        assert not torch.equal(first.samples["sigma"][0], first.samples["sigma"][1])


@pytest.mark.long
def test_the_draws_spread_around_the_map_start_and_a_rate_too_large_overflows_clearly(toy, model):
    swag = fit(model, toy, "swag", seed=0, **SHORT)
    spread = swag.samples["layers.0.weight"].std(dim=1)
    assert (spread > 0).all()
    overflow = r"SWAG's SGD overflowed at epoch \d+, step \d+ \(swag_lr 1e\+06, given\).*lower swag_lr"
    with pytest.raises(ValueError, match=overflow):
        fit(model, toy, "swag", seed=0, **{**SHORT, "swag_lr": 1e6})


@pytest.mark.long
def test_the_record_survives_save_and_load(tmp_path, toy, model):
    posterior = fit(model, toy, "multiswag", seed=1, num_members=2, **SHORT)
    loaded = Posterior.load(posterior.save(tmp_path / "multiswag"))
    assert type(loaded.record) is MultiSWAGRecord
    assert loaded.record == posterior.record == read_record(posterior.record.to_json())
    torch.testing.assert_close(loaded.samples["sigma"], posterior.samples["sigma"])


@pytest.mark.long
def test_command_line_options_reach_swag(tmp_path):
    main(["fit", "--dataset", "toy1d", "--hidden", "2", "--quiet", "--method", "multiswag", "--num-members", "2",
          "--swag-lr", "0.002", "--swag-epochs", "8", "--rank", "4", "--batch-size", "20", "--num-samples", "5",
          "--map-steps", "100", "--member-method", "sequential", "--out", str(tmp_path / "run")])
    record = json.loads((tmp_path / "run" / "fit.json").read_text())["record"]
    options = record["options"]
    assert (record["method"], options["num_members"], options["swag_lr"], options["swag_epochs"], options["rank"],
            record["batch_size"], record["collected"], record["member_method"]) == ("multiswag", 2, 0.002, 8, 4, 20, 8,
                                                                                     "sequential")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["members"] == 2 and "map_converged" in metrics


@pytest.mark.long
@pytest.mark.usefixtures("float64")
def test_the_default_rate_is_the_step_share_over_the_exact_curvature_and_stable_below_two(conjugate):
    """On the conjugate model SGD's step along the posterior precision's top eigenvector multiplies the deviation by
    1 - h lambda_max: at the default rate (h lambda_max = step_share) it stays finite for any share below 2, and a
    rate of 4 / lambda_max (twice the largest stable step, so the minibatches' own curvatures cannot hold it) grows
    it past float64's range within the run."""
    exact = torch.linalg.eigvalsh(torch.linalg.inv(conjugate.cov)).max().item()
    data, rows = (conjugate.x, conjugate.y), conjugate.x.shape[0]
    options = dict(map_steps=200, swag_epochs=500, rank=3, batch_size=8, num_samples=7, progress=False, seed=0)
    for share in (1.0, 1.9):
        record = fit(conjugate.model, data, "swag", step_share=share, **options).record
        assert record.curvature[0] == pytest.approx(exact, rel=0.02)
        assert record.sgd_rates == [pytest.approx(rows * share / record.curvature[0], rel=1e-12)]
    with pytest.raises(ValueError, match=r"SWAG's SGD overflowed .*\(swag_lr [\d.]+, given\)"):
        fit(conjugate.model, data, "swag", swag_lr=rows * 4 / exact, **options)


def test_multiswag_with_parallel_members_asks_the_member_runner_for_one_worker_a_member(toy, model, monkeypatch):
    """The short version of the test below, without starting processes: MultiSWAG's ``member_method="parallel"`` reaches
    :func:`~bnn.inference.map_search.map_starts.run_members` as two workers and the record says so; that the runner's
    workers give the members of the sequence is tested on the deep ensemble (tests/inference/ensemble), whose members go
    through the same runner."""
    asked, run_members = [], map_starts.run_members

    def in_sequence(model, x, y, jobs, workers, progress):
        asked.append(workers)
        return run_members(model, x, y, jobs, 1, progress)

    monkeypatch.setattr(map_starts, "run_members", in_sequence)
    posterior = fit(model, toy, "multiswag", seed=2, num_members=2, **{**SHORT, "member_method": "parallel"})
    assert asked == [2] and posterior.record.member_method == "parallel"


@pytest.mark.slow  # starts worker processes; make test keeps the test above and the ensemble's processes test
@pytest.mark.subprocess
def test_multiswag_fits_its_members_maps_in_processes_with_the_draws_of_the_sequence(toy, model):
    sequence = fit(model, toy, "multiswag", seed=2, num_members=2, **SHORT)
    processes = fit(model, toy, "multiswag", seed=2, num_members=2, **{**SHORT, "member_method": "parallel"})
    assert (sequence.record.member_method, processes.record.member_method) == ("sequential", "parallel")
    for site, draws in sequence.samples.items():
        assert torch.equal(processes.samples[site], draws), site
    assert processes.record.curvature == sequence.record.curvature


@pytest.mark.usefixtures("float32")  # the draws of float32 data: those of float64 data stay finite longer
@pytest.mark.parametrize("method, rate", [("swag", 1e3), ("swag", 1e6), ("multiswag", 50.0)])
def test_a_rate_whose_moments_or_draws_are_not_finite_is_refused_not_returned(toy, method, rate):
    """With a fixed noise the iterates can stay finite while their squares (the second moment) or the draws are not:
    a posterior with non-finite draws is never returned."""
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    given = re.escape(f"{rate:.3g}")
    with pytest.raises(ValueError, match=rf"SWAG's SGD overflowed .*\(swag_lr {given}.*, given\): the rate is too large "
                                         r"for the posterior's curvature; lower swag_lr below [\d.e+-]+, 2N / lambda_max"):
        fit(model, toy, method, swag_lr=rate, seed=0, **{**SHORT, "map_steps": 50, "map_max_iter": 5})


def test_a_diverging_swag_on_the_command_line_prints_its_own_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "--dataset", "breast_cancer", "--hidden", "2", "--quiet", "--method", "swag", "--swag-lr", "1e6",
              "--swag-epochs", "4", "--rank", "2", "--num-samples", "5", "--map-steps", "50", "--out",
              str(tmp_path / "run")])
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and error.startswith("error: SWAG's SGD overflowed"), error
    assert "lower swag_lr" in error and "Expected parameter" not in error


def test_a_start_whose_minibatch_map_did_not_flatten_is_named_with_the_minibatch_advice(conjugate):
    with pytest.warns(RuntimeWarning, match="stopped before"):
        record = fit(conjugate.model, (conjugate.x, conjugate.y), "swag", batch_size=8, map_batch_size=8, map_epochs=2,
                     map_batch_lr=0.05, swag_epochs=3, rank=2, num_samples=4, seed=0, progress=False).record
    assert record.map_minibatch and record.problems() == [
        "the MAP starts of members [0] did not converge: fitted on minibatches, they stopped before they settled "
        "(an objective still rising, or a full gradient beyond their batches' noise); raise map_epochs (--map-epochs) "
        "or map_batch_lr"]


@pytest.mark.long
def test_a_gaussian_wider_than_any_posterior_fails_the_check_and_the_default_step_share_passes():
    # digits (1,437 rows, batches of 45: 32 an epoch) at step share 1.9 (the default before the check): along the
    # stiffest direction SGD's iterates spread 1.9 / 0.1 x 32 = 608 times the posterior's variance, and the draws lose
    # more training log-likelihood than any posterior Gaussian of the network's 1,510 weights can (p_D about 3,000-5,000
    # in either dtype and seed); at the default share 0.5 (10.7 times) p_D is under 110
    model, data = BayesianMLP(64, 10, hidden=(20,), likelihood="categorical"), load_dataset("digits")
    short = dict(map_epochs=30, swag_epochs=20, rank=5, num_samples=20, progress=False, seed=0)
    with pytest.warns(RuntimeWarning, match=r"SWAG's Gaussian of members \[0\] is wider than any posterior Gaussian"):
        record = fit(model, data, "swag", step_share=1.9, **short).record
    assert record.too_wide == [0] and not record.converged and record.latent_values == 1510
    assert record.problems()[-1].endswith("lower step_share (now 1.9)")
    narrow = fit(model, data, "swag", **short).record
    assert narrow.options.step_share == 0.5
    assert narrow.too_wide == [] and narrow.converged and narrow.effective_parameters[0] < 0.1 * narrow.latent_values


@pytest.mark.parametrize("map_batch_size, sgd_dtype", [(8, torch.float32), (None, torch.float64)])
def test_sgd_runs_in_the_maps_precision_and_the_moments_in_float64(conjugate, monkeypatch, map_batch_size, sgd_dtype):
    # a MAP on minibatches runs in float32, as a plain training; a full-batch one is polished in float64
    seen = {}
    log_joint, collect = swag_fit.MinibatchLogJoint, swag_fit.SWAGMoments.collect

    def spied_log_joint(model, x, y, batch):
        seen["sgd"] = x.dtype
        return log_joint(model, x, y, batch)

    def spied_collect(moments, theta):
        seen["collected"] = theta.dtype
        collect(moments, theta)

    monkeypatch.setattr(swag_fit, "MinibatchLogJoint", spied_log_joint)
    monkeypatch.setattr(swag_fit.SWAGMoments, "collect", spied_collect)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a two-epoch minibatch MAP does not converge
        posterior = fit(conjugate.model, (conjugate.x, conjugate.y), "swag", batch_size=8, map_batch_size=map_batch_size,
                        map_epochs=2, map_steps=50, swag_epochs=3, rank=2, num_samples=4, seed=0, progress=False)
    assert posterior.record.map_minibatch == (map_batch_size is not None)
    assert seen == {"sgd": sgd_dtype, "collected": torch.float64}
    assert all(value.dtype == conjugate.x.dtype for value in posterior.samples.values())
