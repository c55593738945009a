"""SGLD, SGHMC and cSGLD as methods of ``fit``: options checked first, seeded draws, Ctrl-C keeps what was drawn, the log
joint is the model's, records and the comparison table carry the chains' diagnostics."""

from __future__ import annotations

import json
import math
import signal

import pyro
import pytest
import torch
from bnn.inference import METHODS, Posterior, fit
from bnn.inference.core.full_batch_work import BATCH_SIZE
from bnn.inference.core.record import read_record
from bnn.inference.evaluation.compare import compare
from bnn.inference.fit import prepare_data
from bnn.inference.map_search.map_starts import map_starts, stacked_sites
from bnn.inference.sgmcmc import ConvergenceWarning, CSGLDRecord, IncompleteSamplingWarning, SGHMCRecord, SGLDRecord, kernels
from bnn.inference.sgmcmc import fit as sgmcmc_fit
from bnn.inference.sgmcmc.curvature import stiffest_curvature
from bnn.inference.sgmcmc.potential import MinibatchLogJoint
from bnn.models import BayesianMLP
from bnn.models.network import MAX_PLATE_NESTING
from pyro.infer.mcmc.util import initialize_model

from bnn.cli.main import main

pytestmark = pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # short runs

SHORT = dict(init="prior", step_size=1e-4, num_warmup=20, num_samples=10, thin=2, batch_size=10, progress=False)
CYCLES = dict(init="prior", step_size=1e-4, num_cycles=3, cycle_length=20, exploration=0.5, thin=2, batch_size=10, progress=False)
"""Three cycles of 20 steps, the last 10 of each sampling: 5 draws per cycle."""


@pytest.mark.parametrize("method, options, message", [
    ("sgld", {"step_size": 0}, "step_size must be a positive number, got 0"),
    ("sgld", {"step_size": float("nan")}, "step_size must be a positive number, got nan"),
    ("sgld", {"step_schedule": "cosine"}, r"unknown step_schedule 'cosine'; choose from \['constant', 'polynomial'\]"),
    ("sgld", {"decay_power": 0.5}, r"decay_power must be a finite number in \(0.5, 1\], got 0.5"),
    ("sgld", {"decay_offset": -1.0}, "decay_offset must be a positive number"),
    ("sgld", {"num_warmup": -1}, "num_warmup must be an integer >= 0, got -1"),
    ("sgld", {"num_samples": 3}, "num_samples must be an integer >= 4, got 3"),
    ("sgld", {"thin": 0}, "thin must be an integer >= 1, got 0"),
    ("sghmc", {"num_chains": 0}, "num_chains must be an integer >= 1, got 0"),
    ("sghmc", {"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ("sghmc", {"batch_size": 2.5}, "batch_size must be an integer >= 1, got 2.5"),
    ("sghmc", {"friction": 1.0}, r"friction must be a probability in \(0, 1\), got 1.0"),
    ("sghmc", {"precondition": "rmsprop"}, r"method 'sghmc' takes no option\(s\) \['precondition'\]"),
    ("sgld", {"friction": 0.1}, r"method 'sgld' takes no option\(s\) \['friction'\]"),
    ("sgld", {"precondition": "adam"}, r"unknown precondition 'adam'; choose from \['none', 'rmsprop'\]"),
    ("sgld", {"precondition_decay": 1.0}, r"precondition_decay must be a probability in \(0, 1\)"),
    ("sgld", {"precondition": "rmsprop", "num_warmup": 0}, "precondition='rmsprop' adapts its preconditioner during the "
                                                             "burn-in and freezes it for the draws: give num_warmup >= 1"),
    ("sgld", {"seed": -1}, "seed must be a non-negative integer below 2\\*\\*32, got -1"),
    ("sghmc", {"progress": "no"}, "progress must be True or False, got 'no'"),
    ("csgld", {"exploration": 1.0}, r"exploration must be a finite number in \[0, 1\), got 1.0"),
    ("csgld", {"cycle_length": 1}, "cycle_length must be an integer >= 2, got 1"),
    ("csgld", {"dynamics": "underdamped"}, r"unknown dynamics 'underdamped'; choose from \['langevin', 'hamiltonian'\]"),
    ("csgld", {"num_warmup": 10}, r"method 'csgld' takes no option\(s\) \['num_warmup'\]"),
    ("sgld", {"init": "prior"}, "init='prior' starts the chains away from a mode, where the curvature that sets the step "
                                "size cannot be measured: give step_size, or start at init='map'"),
    ("sgld", {"init": "posterior"}, r"unknown init 'posterior'; choose from \['map', 'prior'\]"),
    ("sgld", {"step_share": 4.0}, r"step_share must be a finite number in \(0, 4\), got 4.0"),
    ("sghmc", {"step_share": 3.95}, r"step_share=3.95 is past the stability limit 3.9 of the friction-0.05 dynamics"),
    ("csgld", {"dynamics": "hamiltonian", "friction": 0.5, "step_share": 3.0}, "past the stability limit 3 of the "
                                                                                "friction-0.5 dynamics"),
    ("sgld", {"map_method": "threads"}, r"unknown map_method 'threads'; choose from \['auto', 'parallel', 'sequential'\]"),
    ("csgld", {"num_cycles": 1, "cycle_length": 10, "thin": 1}, r"1 cycle\(s\) of 10 steps, 0.8 of each exploring and a "
                                                                 "draw every 1 steps of the rest, keep 2 draws per chain; "
                                                                 "R-hat needs 4"),
])
def test_bad_options_are_refused_before_any_work(monkeypatch, toy, model, method, options, message):
    def no_work(*args, **kwargs):
        raise AssertionError("the sampler started before the options were checked")

    monkeypatch.setattr(sgmcmc_fit, "MinibatchLogJoint", no_work)
    with pytest.raises(ValueError, match=message):
        fit(model, toy, method, **options)


@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_the_same_seed_gives_the_same_draws_and_leaves_the_callers_generators_alone(toy, model, method):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    first = fit(model, toy, method, seed=4, **SHORT)
    assert torch.equal(torch.rand(3), expected_next)  # the fit ran on its own seeded generators
    again = fit(model, toy, method, seed=4, **SHORT)
    other = fit(model, toy, method, seed=5, **SHORT)
    for site in model.latent_shapes:
        assert first.samples[site].shape[:2] == (2, SHORT["num_samples"])
        assert torch.equal(first.samples[site], again.samples[site]), site
        assert not torch.equal(first.samples[site], other.samples[site]), site
    assert (first.samples["sigma"] > 0).all()
    assert first.record.gradient_evaluations == 2 * (SHORT["num_warmup"] + SHORT["num_samples"] * SHORT["thin"])
    assert first.record.batch_size == 10 and first.sample_stats["lp"].shape == (2, SHORT["num_samples"])


def signal_at_step(monkeypatch, kernel: type, step: int, signum: int = signal.SIGINT) -> None:
    """The kernel's ``step``-th update (counting from 1) sends ``signum`` to this process, as Ctrl-C or ``kill`` would."""
    calls, update = [0], kernel.step

    def signalling(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == step:
            signal.raise_signal(signum)
        return update(self, *args, **kwargs)

    monkeypatch.setattr(kernel, "step", signalling)


@pytest.mark.parametrize("method, kernel, signum, cause", [
    ("sgld", kernels.SGLDKernel, signal.SIGINT, "KeyboardInterrupt"),
    ("sghmc", kernels.SGHMCKernel, signal.SIGTERM, "KeyboardInterrupt: SIGTERM"),
])
def test_an_interrupt_keeps_the_draws_made_so_far_marked_incomplete(monkeypatch, toy, model, method, kernel, signum,
                                                                      cause):
    complete = fit(model, toy, method, seed=3, **SHORT)
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    step = SHORT["num_warmup"] + 7 * SHORT["thin"] + 1  # the 8th draw is being made
    signal_at_step(monkeypatch, kernel, step, signum)
    with pytest.warns(IncompleteSamplingWarning, match=rf"interrupted \({cause}\) at step {step - 1}; kept 7 of 10"):
        stopped = fit(model, toy, method, seed=3, **SHORT)
    assert signal.getsignal(signal.SIGTERM) == previous_sigterm
    assert stopped.record.incomplete and stopped.num_draws == 7 and stopped.num_chains == 2
    assert stopped.record.metrics()["incomplete"] is True
    for site in model.latent_shapes:  # the draws made before the signal, as the complete run made them
        assert torch.equal(stopped.samples[site], complete.samples[site][:, :7]), site
    assert math.isfinite(stopped.record.diagnostics.ess_bulk_min)


def test_an_interrupt_before_four_draws_raises(monkeypatch, toy, model):
    signal_at_step(monkeypatch, kernels.SGLDKernel, 5)
    with pytest.raises(KeyboardInterrupt):
        fit(model, toy, "sgld", **SHORT)


@pytest.mark.parametrize("method, dynamics", [("sgld", {}), ("sghmc", {}), ("csgld", {"dynamics": "hamiltonian"})])
def test_by_default_each_chain_starts_at_its_own_map_with_a_step_set_by_the_curvature_there(monkeypatch, toy, model,
                                                                                            method, dynamics):
    starts = {}
    real = sgmcmc_fit._sample

    def recording(name, log_joint, kernel, options, z, first_steps, chains):
        starts.update(z=z.clone(), curvature=stiffest_curvature(log_joint, z))
        return real(name, log_joint, kernel, options, z, first_steps, chains)

    monkeypatch.setattr(sgmcmc_fit, "_sample", recording)
    options = {**(CYCLES if method == "csgld" else SHORT), **dynamics, "init": "map", "step_size": None,
               "map_method": "sequential", "map_steps": 300}
    record = fit(model, toy, method, seed=2, **options).record
    share = record.options.step_share
    assert share == {"sgld": 1.0, "sghmc": 0.25, "csgld": 2.0}[method]
    # each chain at its own MAP fit (the ensemble's member fits, with their seeds), its step share / lambda_max there
    x, y = (value.to(torch.float64) for value in prepare_data(model, toy))
    fits = map_starts(model, x, y, record.options, 2, 2, 1, False)
    log_joint = MinibatchLogJoint(model, toy.x_train, toy.y_train, None)
    torch.testing.assert_close(starts["z"], log_joint.start_at(stacked_sites(model, fits)))  # the noise: RMS residual
    assert record.map_converged == [fit.converged for fit in fits]
    assert record.step_sizes == pytest.approx([share / value for value in record.curvature], rel=1e-6)
    assert record.curvature == pytest.approx(starts["curvature"].tolist(), rel=0.02)  # another power-iteration start
    assert record.curvature[0] != record.curvature[1] and record.metrics()["step_size"] == max(record.step_sizes)


def test_each_cycle_takes_its_first_step_from_the_curvature_where_it_restarts(monkeypatch, toy, model):
    measured = []

    def curvature(log_joint, z):
        measured.append(z.clone())
        return torch.full(z.shape[:1], 1e4 * len(measured))

    monkeypatch.setattr(sgmcmc_fit, "stiffest_curvature", curvature)
    options = {**CYCLES, "init": "map", "step_size": None, "map_method": "sequential", "map_steps": 300}
    posterior = fit(model, toy, "csgld", seed=0, **options)
    assert len(measured) == 3 and not torch.equal(measured[1], measured[2])  # the start, then cycles 2 and 3
    first = [2.0 / (1e4 * cycle) for cycle in (1, 2, 3)]  # step_share 2 over each cycle's curvature
    kept = [(math.cos(math.pi * j / 20) + 1) / 2 for j in (11, 13, 15, 17, 19)]
    expected = [step * factor for step in first for factor in kept]
    assert posterior.sample_stats["step_size"][0].tolist() == pytest.approx(expected)
    assert posterior.record.step_sizes == pytest.approx([2.0 / 1e4] * 2)  # the first cycle's


def test_an_overflow_at_a_step_set_by_the_curvature_names_the_share(monkeypatch, toy, model):
    monkeypatch.setattr(sgmcmc_fit, "stiffest_curvature", lambda log_joint, z: torch.full(z.shape[:1], 1e-6))
    with pytest.raises(ValueError, match=r"SGLD diverged: .*\(step size 1e\+06, 1e\+06\).*lower step_share$"):
        fit(model, toy, "sgld", **{**SHORT, "init": "map", "step_size": None, "map_method": "sequential",
                                   "map_steps": 300})


def test_a_step_too_large_for_the_curvature_stops_with_a_clear_error(toy, model):
    with pytest.raises(ValueError, match=r"SGLD diverged: the state of chain\(s\) \[.*\] overflowed at step \d+ "
                                         r"\(step size 1e\+06, 1e\+06\).*lower step_size"):
        fit(model, toy, "sgld", **{**SHORT, "step_size": 1e6})
    with pytest.raises(ValueError, match=r"SGHMC diverged: .*lower step_size, or raise friction"):
        fit(model, toy, "sghmc", **{**SHORT, "step_size": 1e6})


@pytest.mark.parametrize("prior", ["gaussian", {"name": "scale-mixture"}, {"name": "laplace", "scale": 0.5}])
def test_the_log_joint_is_pyros_potential_with_the_noise_in_log_space(toy, prior):
    """Full batches: :math:`\\log\\hat\\pi(z) = -U(z)` + a constant, with Pyro's potential :math:`U` of the model's
    program (the learned noise as :math:`\\log\\sigma` with its Jacobian); minibatches: one epoch of estimates
    averages to it exactly."""
    model = BayesianMLP(1, 1, hidden=(3,), prior=prior, likelihood={"name": "gaussian", "scale": None})
    x, y = toy.x_train, toy.y_train
    _, potential, _, _ = initialize_model(model, (x, y), max_plate_nesting=MAX_PLATE_NESTING)
    full, batched = MinibatchLogJoint(model, x, y, None), MinibatchLogJoint(model, x, y, 10)
    z = torch.randn(4, full.dim)
    with pyro.validation_enabled(False):
        exact = full.log_joint(z, None)
        offsets = [exact[chain] + potential({site: value[chain] for site, value in full.split(z).items()})
                   for chain in range(4)]
        epoch = torch.stack([batched.log_joint(z, batched.next_batches(4)) for _ in range(3)])
    torch.testing.assert_close(torch.stack(offsets), offsets[0].expand(4), rtol=0, atol=1e-3)
    assert len(set(epoch[:, 0].tolist())) == 3  # the batches differ
    torch.testing.assert_close(epoch.mean(0), exact, rtol=1e-5, atol=1e-3)
    _, gradient = full.gradient(z, None)
    assert gradient.shape == (4, full.dim) and torch.isfinite(gradient).all()


def test_a_chain_starts_at_prior_weights_and_the_noise_that_fits_them_best(toy):
    r"""The learned noise starts at the root mean square residual of its chain's drawn network, where the
    likelihood's gradient in :math:`\log\sigma` vanishes: what is left is the prior's and the Jacobian's,
    :math:`1 - \sigma^2/s^2` under :math:`\text{HalfNormal}(s)` (a tiny prior draw of the noise there made the
    first gradient :math:`\sum_i r_i^2/\sigma^2 - N` overflow the first step)."""
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None, "noise_prior_scale": 2.0})
    log_joint = MinibatchLogJoint(model, toy.x_train, toy.y_train, None)
    torch.manual_seed(0)
    z = log_joint.start(4)
    values = log_joint.constrained(z)
    residuals = toy.y_train - model.forward(toy.x_train, values)[..., 0]
    torch.testing.assert_close(values["sigma"], residuals.square().mean(-1).sqrt())
    with pyro.validation_enabled(False):
        _, gradient = log_joint.gradient(z, None)
    torch.testing.assert_close(gradient[:, -1], 1 - values["sigma"] ** 2 / 4.0, rtol=1e-4, atol=1e-3)
    assert len({tuple(weights) for weights in z[:, :-1].tolist()}) == 4  # each chain its own draw of the weights


def test_the_polynomial_schedule_and_psgld_reach_the_record_and_the_draws(toy, model):
    options = {**SHORT, "step_schedule": "polynomial", "decay_offset": 10.0, "decay_power": 0.6, "precondition": "rmsprop"}
    posterior = fit(model, toy, "sgld", seed=0, **options)
    draw_steps = torch.arange(options["num_warmup"] + 1, options["num_warmup"] + 21, 2, dtype=torch.float64)
    expected = options["step_size"] * (1 + draw_steps / 10.0) ** -0.6
    torch.testing.assert_close(torch.as_tensor(posterior.sample_stats["step_size"][1]), expected)
    record = posterior.record
    assert isinstance(record, SGLDRecord) and record.options.precondition == "rmsprop"
    assert record.options.step_schedule == "polynomial"
    assert record.final_step_size == pytest.approx([options["step_size"] * (1 + 39 / 10.0) ** -0.6] * 2)
    assert record.step_sizes == pytest.approx([options["step_size"]] * 2)
    assert record.curvature is None and record.map_converged is None
    gain = posterior.extras["preconditioner"]
    assert set(gain) == set(model.latent_shapes) and all((value > 0).all() for value in gain.values())


@pytest.mark.parametrize("method", ["sgld", "sghmc", "csgld"])
def test_the_record_survives_save_and_load(tmp_path, toy, model, method):
    posterior = fit(model, toy, method, seed=1, **(CYCLES if method == "csgld" else SHORT))
    loaded = Posterior.load(posterior.save(tmp_path / method))
    assert type(loaded.record) is {"sgld": SGLDRecord, "sghmc": SGHMCRecord, "csgld": CSGLDRecord}[method]
    assert loaded.record == posterior.record == read_record(posterior.record.to_json())
    torch.testing.assert_close(loaded.samples["sigma"], posterior.samples["sigma"])


def test_compare_gives_sgld_and_sghmc_rows_with_r_hat_and_ess(toy, model):
    fits = [fit(model, toy, method, seed=0, **SHORT) for method in ("sgld", "sghmc")]
    table = compare(fits, toy)
    assert list(table.index) == ["sgld", "sghmc"]
    for label, posterior in zip(table.index, fits):
        diagnostics = posterior.record.diagnostics
        for column in ("r_hat_max", "r_hat_predictive", "ess_bulk_min", "ess_tail_min", "test_rmse", "test_ll", "loo_elpd"):
            assert math.isfinite(table.loc[label, column]), (label, column)
        assert table.loc[label, "r_hat_max"] == diagnostics.r_hat_max
        assert table.loc[label, "converged"] == diagnostics.converged and table.loc[label, "divergences"] == 0


@pytest.mark.parametrize("dynamics", ["langevin", "hamiltonian"])
def test_cyclical_chains_keep_the_sampling_parts_draws_at_their_cosine_steps_seeded(toy, model, dynamics):
    first = fit(model, toy, "csgld", seed=4, dynamics=dynamics, **CYCLES)
    again = fit(model, toy, "csgld", seed=4, dynamics=dynamics, **CYCLES)
    for site in model.latent_shapes:
        assert first.samples[site].shape[:2] == (2, 15)
        assert torch.equal(first.samples[site], again.samples[site]), site
    kept = [11, 13, 15, 17, 19]  # steps 10-19 of each cycle sample; every second one is kept
    expected = [CYCLES["step_size"] / 2 * (math.cos(math.pi * j / 20) + 1) for j in kept] * 3
    assert first.sample_stats["step_size"][0].tolist() == pytest.approx(expected)
    record = first.record
    assert isinstance(record, CSGLDRecord) and record.options.dynamics == dynamics
    assert record.gradient_evaluations == 2 * 3 * 20 and record.batch_size == 10
    assert record.final_step_size == pytest.approx([CYCLES["step_size"] / 2 * (math.cos(math.pi * 19 / 20) + 1)] * 2)


def test_a_cyclical_chain_explores_without_noise(monkeypatch, toy, model):
    """One normal draw of noise per sampling step, none in the exploring ones (the Langevin kernel draws nothing
    else)."""
    drawn = []
    real = torch.randn_like

    def counting(tensor, *args, **kwargs):
        drawn.append(1)
        return real(tensor, *args, **kwargs)

    monkeypatch.setattr(kernels.torch, "randn_like", counting)
    fit(model, toy, "csgld", seed=0, **{**CYCLES, "num_chains": 1})
    assert len(drawn) == 3 * 10  # one noise draw per sampling step, none in the 3 x 10 exploring ones


def test_a_cyclical_run_that_does_not_converge_says_what_to_lengthen(toy, model):
    with pytest.warns(ConvergenceWarning, match=r"cSGLD did not converge: .*\. Raise num_cycles or cycle_length, run two or "
                                                r"more chains"):
        fit(model, toy, "csgld", seed=0, **CYCLES)


@pytest.mark.long
def test_command_line_options_reach_the_samplers(tmp_path):
    # the chains' MAP starts in this process (worker processes would take most of the test's time to start) and cut
    # short: the options' way to the samplers is the point, not the starts
    base = ["fit", "--dataset", "toy1d", "--hidden", "2", "--quiet", "--map-method", "sequential", "--map-steps", "50",
            "--map-max-iter", "10"]
    short = ["--num-warmup", "10", "--num-samples", "5"]
    main([*base, *short, "--method", "sghmc", "--step-size", "2e-5", "--friction", "0.2", "--thin", "3", "--batch-size", "25",
          "--num-chains", "3", "--out", str(tmp_path / "sghmc")])
    record = json.loads((tmp_path / "sghmc" / "fit.json").read_text())["record"]
    options = record["options"]
    assert (record["method"], options["step_size"], options["friction"], options["thin"], record["batch_size"],
            options["num_chains"]) == ("sghmc", 2e-5, 0.2, 3, 25, 3) and options["map_method"] == "sequential"
    main([*base, *short, "--method", "sgld", "--precondition", "rmsprop", "--step-schedule", "polynomial", "--decay-offset", "50",
          "--decay-power", "0.8", "--out", str(tmp_path / "sgld")])
    metrics = json.loads((tmp_path / "sgld" / "metrics.json").read_text())
    assert metrics["method"] == "sgld" and math.isfinite(metrics["r_hat_max"]) and "converged" in metrics
    options = json.loads((tmp_path / "sgld" / "fit.json").read_text())["record"]["options"]
    assert (options["precondition"], options["step_schedule"], options["decay_offset"], options["decay_power"]) == (
        "rmsprop", "polynomial", 50.0, 0.8)
    main([*base, "--method", "csgld", "--num-cycles", "2",
          "--cycle-length", "40", "--exploration", "0.5", "--thin", "4", "--dynamics", "hamiltonian", "--friction", "0.1",
          "--out", str(tmp_path / "csgld")])
    record = json.loads((tmp_path / "csgld" / "fit.json").read_text())["record"]
    options = record["options"]
    assert (record["method"], options["num_cycles"], options["cycle_length"], options["exploration"], options["thin"],
            options["dynamics"], options["friction"]) == ("csgld", 2, 40, 0.5, 4, "hamiltonian", 0.1)


@pytest.mark.parametrize("method", ["sgld", "sghmc", "csgld"])
def test_gradients_take_all_the_rows_where_the_chains_are_cheap_and_a_plain_trainings_batch_elsewhere(toy, method):
    """The regime of bnn.inference.core.full_batch_work over every chain's steps: toy1d's chains take all their rows,
    an MNIST-size network's take 128 (a short run of it is cheap again), an explicit batch size wins; the cost model
    times its gradient on the same rows."""
    costly = BayesianMLP(784, 10, hidden=(64,), likelihood="categorical")
    options = METHODS.get(method).parse({})
    assert options.batch_rows(BayesianMLP(1, 1, hidden=(10,)), toy.x_train.shape[0]) == toy.x_train.shape[0]
    assert options.batch_rows(costly, 20000) == BATCH_SIZE
    assert METHODS.get(method).cost.rows(options, 20000, costly) == BATCH_SIZE
    short = ({"num_cycles": 1, "cycle_length": 20, "thin": 1} if method == "csgld"
             else {"num_warmup": 1, "num_samples": 4, "thin": 1})
    assert METHODS.get(method).parse(short).batch_rows(costly, 20000) == 20000
    assert METHODS.get(method).parse({"batch_size": 50}).batch_rows(costly, 20000) == 50
