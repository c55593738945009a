"""MC dropout: its draws are the dropout network's masked weights, trained on the model's prior and likelihood."""

from __future__ import annotations

import dataclasses
import json
import math
import signal

import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.core.record import read_record
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.map_search.log_joint import prior_distributions
from bnn.inference.mc_dropout import (
    IncompleteTrainingWarning,
    MCDropoutOptions,
    MCDropoutRecord,
    dropout_forward,
    expected_log_prior,
    fit_mc_dropout,
)
from bnn.inference.mc_dropout import fit as mc_dropout_fit
from bnn.inference.mc_dropout.cost import COST
from bnn.inference.mc_dropout.fit import initial_weights
from bnn.inference.mc_dropout.options import MAX_LENGTHS, DropoutInit
from bnn.inference.mc_dropout.record import GAIN_LIMIT
from bnn.models import BayesianMLP, GaussianPrior

from bnn.cli.main import main

RATE = 0.2
X = torch.randn(30, 3, generator=torch.Generator().manual_seed(0))
Y = X[:, 0] - 0.5 * X[:, 1] + 0.1 * torch.randn(30, generator=torch.Generator().manual_seed(1))


def small_model(**kwargs) -> BayesianMLP:
    return BayesianMLP(3, 1, hidden=(20, 10), likelihood=kwargs.pop("likelihood", {"name": "gaussian", "scale": None}),
                       **kwargs)


@pytest.fixture(scope="module")
def posterior() -> Posterior:
    return fit(small_model(), (X, Y), "mc-dropout", dropout_rate=RATE, steps=600, num_samples=500, progress=False)


def masks_of(posterior: Posterior) -> list[torch.Tensor]:
    """Each draw's inverted-dropout mask per layer, ``(S, d_l)``, read off the zero columns of its weights."""
    keep = 1 - RATE
    return [(posterior.draws()[site.name] != 0).any(-2).to(X.dtype) / keep for site in posterior.model.sites[::2]]


@pytest.mark.long
def test_draws_zero_whole_columns_at_the_dropout_rate(posterior):
    weights = posterior.extras["weights"]
    draws = posterior.draws()
    trials = dropped = 0
    for mask, site, bias in zip(masks_of(posterior), posterior.model.sites[::2], posterior.model.sites[1::2]):
        # a column is dropped whole or kept whole, scaled by 1 / (1 - p); biases are never dropped
        torch.testing.assert_close(draws[site.name], weights[site.name] * mask.unsqueeze(-2), rtol=0, atol=0)
        assert torch.equal(draws[bias.name], weights[bias.name].expand_as(draws[bias.name]))
        trials, dropped = trials + mask.numel(), dropped + int((mask == 0).sum())
    # the dropped fraction is Binomial(trials, p) / trials: within 4 standard deviations
    assert abs(dropped / trials - RATE) < 4 * math.sqrt(RATE * (1 - RATE) / trials), (dropped, trials)
    assert posterior.samples["layers.0.weight"].shape == (1, 500, 20, 3) and posterior.num_chains == 1
    assert torch.equal(posterior.samples["sigma"], posterior.samples["sigma"][0, :1].expand(1, 500))


def test_the_predictive_averages_the_dropout_network_over_the_same_masks(posterior):
    x = torch.randn(7, 3)
    weights = posterior.extras["weights"]
    passes = dropout_forward(posterior.model, x, weights, [mask.unsqueeze(-2) for mask in masks_of(posterior)])
    assert passes.shape == (500, 7, 1)
    torch.testing.assert_close(posterior.function_draws(x, posterior.draws()), passes)
    torch.testing.assert_close(posterior.predict(x).mean, passes.mean(0)[:, 0])


def test_the_gaussian_prior_becomes_the_papers_weight_decay():
    r"""With :math:`\mathcal{N}(0, s^2)`, :math:`E_q[\log p(W)] = -\lVert M\rVert^2 / (2 s^2 (1 - p))` + const over weights."""
    model = BayesianMLP(3, 1, hidden=(4,), prior=GaussianPrior(0.5))
    distributions = prior_distributions(model)
    values = {site.name: torch.randn(site.shape) for site in model.sites}
    zero = {name: torch.zeros_like(value) for name, value in values.items()}
    change = expected_log_prior(model, values, RATE, distributions) - expected_log_prior(model, zero, RATE, distributions)
    weights = sum(values[site.name].pow(2).sum() for site in model.sites[::2])
    biases = sum(values[site.name].pow(2).sum() for site in model.sites[1::2])
    torch.testing.assert_close(change, -weights / (2 * 0.25 * (1 - RATE)) - biases / (2 * 0.25))


@pytest.mark.parametrize("prior", ["laplace", "scale-mixture"])
def test_other_priors_and_a_fixed_noise_train(prior):
    model = small_model(prior=prior, likelihood={"name": "gaussian", "scale": 0.3})
    posterior = fit(model, (X, Y), "mc-dropout", steps=30, num_samples=5, batch_size=8, progress=False)
    assert posterior.record.loss_history[-1] < posterior.record.loss_history[0]
    assert posterior.record.noise is None and posterior.record.batch_size == 8
    assert all(torch.isfinite(value).all() for value in posterior.samples.values())


@pytest.mark.long
def test_a_learned_noise_is_fitted_and_every_draw_holds_it():
    model = BayesianMLP(3, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": None})
    posterior = fit(model, (X, Y), "mc-dropout", steps=300, num_samples=3, dropout_rate=0.01, progress=False)
    assert 0.05 < posterior.record.noise < 0.4  # the data's noise is 0.1; the network is trained briefly
    torch.testing.assert_close(posterior.samples["sigma"], torch.full((1, 3), posterior.record.noise))


def test_epochs_count_passes_over_the_rows_in_minibatches_and_the_cost_counts_them():
    posterior = fit(small_model(), (X, Y), "mc-dropout", epochs=3, batch_size=8, num_samples=2, progress=False)
    assert posterior.record.steps_done == len(posterior.record.loss_history) == 3 * 4  # 30 rows: 4 minibatches of 8
    assert COST.count(posterior.record.options, 30, posterior.model).gradients == 12
    assert COST.count(posterior.record.options, 33, posterior.model).gradients == 15  # the last minibatch holds 1
    assert fit(small_model(), (X, Y), "mc-dropout", epochs=2, num_samples=2, progress=False).record.steps_done == 2
    with pytest.raises(ValueError, match="give steps or epochs, not both"):
        fit(small_model(), (X, Y), "mc-dropout", epochs=3, steps=999, progress=False)


def test_the_default_training_is_the_default_epochs_steps_when_given_are_kept():
    options = MCDropoutOptions.parse("mc-dropout", {})
    assert options.training_steps(1437) == 3000  # digits: 250 epochs of 12 minibatches
    assert options.training_steps(41_157) == 50 * math.ceil(41_157 / 128)  # protein: 50 epochs, not 9
    assert MCDropoutOptions.parse("mc-dropout", {"steps": 700}).training_steps(41_157) == 700


def linear_losses(gain_per_tenth: float, noise: float, steps: int = 1000) -> list[float]:
    """A loss history falling by ``gain_per_tenth`` per tenth of ``steps`` (so the objective gains exactly that between
    the last two tenths), plus seeded Gaussian noise of scale ``noise``."""
    drift = -gain_per_tenth * torch.arange(steps, dtype=torch.float64) / (steps / 10)
    return (drift + noise * torch.randn(steps, generator=torch.Generator().manual_seed(0), dtype=torch.float64)).tolist()


@pytest.mark.parametrize(("gain", "noise", "converged"), [
    (0.0, 0.05, True),  # flat and noisy
    (2.5 * GAIN_LIMIT, 0.05, False),  # a significant gain above the limit
    (0.5 * GAIN_LIMIT, 0.001, True),  # significant, but below the limit: the creep of a settled fit
    (2.5 * GAIN_LIMIT, 2.0, True),  # above the limit, but within the noise
])
def test_the_check_flags_a_gain_both_above_the_limit_and_beyond_its_noise(posterior, gain, noise, converged):
    record = dataclasses.replace(posterior.record, loss_history=linear_losses(gain, noise))
    assert record.trend.later_steps == record.trend.earlier_steps == 100
    assert record.converged is converged
    problems = record.problems()
    assert problems == [] if converged else (len(problems) == 1 and "still rising" in problems[0]
                                             and f"{record.trend.gain:.3g} nats per example" in problems[0])
    assert dataclasses.replace(posterior.record, loss_history=linear_losses(gain, noise, 99)).converged is None


def test_a_default_length_training_goes_on_while_it_gains_and_a_given_length_does_not(monkeypatch):
    """A rate too low to settle in a length runs every length the default allows, then warns; a length that settles
    stops after one; ``steps`` given is the length, gaining or not."""
    monkeypatch.setattr(MCDropoutOptions, "training_steps", lambda self, rows: 100 if self.steps is None else self.steps)
    with pytest.warns(ConvergenceWarning, match="still rising"):
        slow = fit(small_model(), (X, Y), "mc-dropout", lr=1e-4, num_samples=2, progress=False)
    assert slow.record.steps_done == len(slow.record.loss_history) == MAX_LENGTHS * 100 and not slow.record.converged
    with pytest.warns(ConvergenceWarning, match="still rising"):
        given = fit(small_model(), (X, Y), "mc-dropout", lr=1e-4, steps=100, num_samples=2, progress=False)
    assert given.record.steps_done == 100
    monkeypatch.setattr(MCDropoutOptions, "training_steps", lambda self, rows: 600)
    settled = fit(small_model(), (X, Y), "mc-dropout", dropout_rate=RATE, num_samples=2, progress=False)
    assert settled.record.steps_done == 600 and settled.record.converged


def test_glorot_init_draws_uniform_weights_within_the_glorot_bound_and_zero_biases_and_prior_init_draws_the_prior():
    model = BayesianMLP(300, 1, hidden=(200,))
    distributions = prior_distributions(model)
    torch.manual_seed(0)
    start = initial_weights(distributions, DropoutInit.GLOROT)
    for site in model.sites:
        value = start[site.name]
        assert value.shape == site.shape
        if site.name.endswith("bias"):
            assert torch.equal(value, torch.zeros(site.shape))
            continue
        fan_out, fan_in = site.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        assert value.abs().max() <= bound
        # U(-a, a) has variance a^2 / 3; its estimate's sd is a^2 sqrt(4 / (45 n)): within 5 of them
        assert abs(value.var() - bound ** 2 / 3) < 5 * bound ** 2 * math.sqrt(4 / (45 * value.numel()))
    torch.manual_seed(0)
    drawn = initial_weights(distributions, DropoutInit.PRIOR)
    torch.manual_seed(0)
    assert all(torch.equal(drawn[name], d.sample()) for name, d in distributions.items())


def test_the_same_seed_gives_the_same_draws_and_another_seed_others():
    a, b, c = (fit_mc_dropout(small_model(), X, Y, steps=5, num_samples=4, seed=seed, progress=False) for seed in (3, 3, 4))
    for name in a.samples:
        assert torch.equal(a.samples[name], b.samples[name]), name
    assert not torch.equal(a.samples["layers.0.weight"], c.samples["layers.0.weight"])


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(dropout_rate=0.0), r"dropout_rate must be a probability in \(0, 1\), got 0.0"),
        (dict(dropout_rate=1), r"dropout_rate must be a probability in \(0, 1\), got 1"),
        (dict(dropout_rate="0.1"), r"dropout_rate must be a probability"),
        (dict(steps=0), "steps must be a positive integer, got 0"),
        (dict(lr=-1.0), "lr must be a positive number"),
        (dict(batch_size=0), "batch_size must be an integer >= 1, got 0"),
        (dict(epochs=0), "epochs must be an integer >= 1, got 0"),
        (dict(weight_init="xavier"), r"unknown weight_init 'xavier'; choose from \['prior', 'glorot'\]"),
        (dict(num_samples=2.5), "num_samples must be a positive integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(progress="no"), "progress must be True or False"),
        (dict(num_chains=2), r"method 'mc-dropout' takes no option\(s\) \['num_chains'\]"),
    ],
)
def test_bad_options_are_refused_before_any_work(options, message, monkeypatch):
    monkeypatch.setattr(mc_dropout_fit, "prior_distributions", lambda model: pytest.fail("work started"))
    with pytest.raises(ValueError, match=message):
        fit(small_model(), (X, Y), "mc-dropout", **options)


def test_a_non_finite_objective_is_a_value_error_naming_the_rate():
    with pytest.raises(ValueError, match=r"objective became (nan|inf|-inf) at step \d+; lower lr \(now 1e\+30\)"):
        fit(small_model(), (X, Y), "mc-dropout", steps=20, lr=1e30, progress=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_keeps_the_network_trained_so_far_marked_incomplete(signum, monkeypatch):
    draw_masks, calls = mc_dropout_fit.draw_masks, []

    def signalling(*args):
        calls.append(args)
        if len(calls) == 7:  # during step 7
            signal.raise_signal(signum)
        return draw_masks(*args)

    monkeypatch.setattr(mc_dropout_fit, "draw_masks", signalling)
    with pytest.warns(IncompleteTrainingWarning, match=rf"interrupted \({signal.Signals(signum).name}\) after step 7 of 50"):
        posterior = fit(small_model(), (X, Y), "mc-dropout", steps=50, num_samples=4, progress=False)
    record = posterior.record
    assert record.incomplete and record.steps_done == len(record.loss_history) == 7
    assert record.metrics()["incomplete"] is True
    assert record.problems() == [f"MC dropout was interrupted: {record.incomplete_reason}"]
    assert posterior.num_draws == 4
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are back


def test_the_record_survives_json_and_save_load(posterior, tmp_path):
    record = read_record(posterior.record.to_json())
    assert isinstance(record, MCDropoutRecord) and record == posterior.record
    loaded = Posterior.load(posterior.save(tmp_path / "fit"))
    assert loaded.record == posterior.record
    assert torch.equal(loaded.samples["layers.1.weight"], posterior.samples["layers.1.weight"])


def test_the_command_line_takes_the_method_and_its_options(tmp_path):
    out = tmp_path / "run"
    main(["fit", "--method", "mc-dropout", "--dropout-rate", "0.1", "--steps", "20", "--num-samples", "10", "--hidden", "5",
          "--out", str(out), "--quiet"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "mc-dropout" and metrics["dropout_rate"] == 0.1 and math.isfinite(metrics["test_ll"])
    assert Posterior.load(out).record.steps_done == 20


@pytest.mark.parametrize("likelihood, out, labels", [("bernoulli", 1, 2), ("categorical", 3, 3)])
def test_classifiers_train_and_predict_probabilities(likelihood, out, labels):
    y = torch.randint(0, labels, (30,), generator=torch.Generator().manual_seed(2))
    model = BayesianMLP(3, out, hidden=(5,), likelihood=likelihood)
    posterior = fit(model, (X, y), "mc-dropout", steps=20, num_samples=6, progress=False)
    probs = posterior.predict(X[:4]).probs
    assert probs.shape == ((4,) if out == 1 else (4, 3)) and ((probs >= 0) & (probs <= 1)).all()
