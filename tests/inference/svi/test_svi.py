from __future__ import annotations

import warnings

import pyro
import pytest
import torch
from bnn.datasets import load_toy1d, toy_function
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE
from bnn.inference.svi.cost import step_seconds
from bnn.inference.svi.nonfinite import NonFiniteELBOError
from bnn.inference.svi.optimiser import ADAM_BETAS
from bnn.inference.svi.options import SVIOptions
from bnn.inference.svi.schedules import LRSchedule
from bnn.models import BayesianMLP
from pyro.infer.autoguide import AutoDiagonalNormal

from bnn.runtime.jit_deprecation import torch_jit_deprecation_ignored


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=60, n_test=60)


def small_model(**kwargs):
    return BayesianMLP(1, 1, hidden=(8,), **kwargs)


@pytest.mark.long
def test_same_seed_same_numbers_different_seed_different_numbers(toy):
    a = fit(small_model(), toy, steps=30, seed=3, progress=False, num_samples=20)
    b = fit(small_model(), toy, steps=30, seed=3, progress=False, num_samples=20)
    c = fit(small_model(), toy, steps=30, seed=4, progress=False, num_samples=20)
    assert a.record.elbo == b.record.elbo
    assert all(torch.equal(a.samples[k], b.samples[k]) for k in a.samples)
    assert a.record.elbo != c.record.elbo


@pytest.mark.long
def test_fits_do_not_leak_parameters_and_leave_the_global_rng_alone(toy):
    """Two guides with identical parameter names: each fit gives what it gives alone."""
    alone = fit(small_model(), toy, steps=25, seed=1, progress=False, num_samples=10)
    pyro.get_param_store().clear()
    pyro.param("AutoNormal.locs.layers.0.weight", torch.full((8, 1), 99.0))  # a stale user parameter
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    other = fit(BayesianMLP(1, 1, hidden=(8,), activation="relu"), toy, steps=25, seed=2, progress=False, num_samples=10)
    again = fit(small_model(), toy, steps=25, seed=1, progress=False, num_samples=10)
    assert torch.equal(torch.rand(3), expected_next)
    assert again.record.elbo == alone.record.elbo
    assert other.record.elbo != alone.record.elbo
    assert torch.all(pyro.param("AutoNormal.locs.layers.0.weight") == 99.0)
    pyro.get_param_store().clear()


@pytest.mark.long
def test_recovers_a_known_function(toy):
    """With the noise known, the predictive mean is within the noise sd (0.1) of the true function,
    and the test RMSE is close to the noise."""
    data = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(50,), likelihood={"name": "gaussian", "scale": 0.1})
    posterior = fit(model, data, steps=2500, lr=0.02, lr_schedule="cosine", jit=True, progress=False, seed=0)
    x = data.x_scaler.inverse(data.x_test)[:, 0]
    mean = data.y_scaler.inverse(posterior.predict(data.x_test).mean)
    assert ((mean - toy_function(x)) ** 2).mean().sqrt() < 0.1
    assert evaluate(posterior, data)["test_rmse"] < 1.6 * 0.1


def test_minibatches_epochs_particles_and_schedules(toy):
    posterior = fit(small_model(), toy, epochs=3, batch_size=20, num_particles=4, lr_schedule="exponential",
                    progress=False, num_samples=5)
    assert posterior.record.steps == 9 and len(posterior.record.elbo) == 9
    assert posterior.record.batch_size == 20


def test_a_user_autoguide_class_and_a_user_guide_callable(toy):
    posterior = fit(small_model(), toy, guide=AutoDiagonalNormal, steps=10, progress=False, num_samples=5)
    assert posterior.record.guide == "AutoDiagonalNormal"

    model = small_model()

    def point_guide(x, y=None, num_data=None):
        for site in model.sites:
            loc = pyro.param(f"my.{site.name}", torch.zeros(site.shape))
            pyro.sample(site.name, pyro.distributions.Delta(loc).to_event(len(site.shape)))

    posterior = fit(model, toy, guide=point_guide, steps=10, progress=False, num_samples=4)
    assert posterior.record.guide == "point_guide" and posterior.samples["layers.0.weight"].shape == (1, 4, 8, 1)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(steps=10, epochs=2), "give steps or epochs, not both"),
        (dict(batch_size=1000), "batch_size 1000 exceeds the 60 training examples"),
        (dict(steps=0), "steps must be a positive integer"),
        (dict(lr=-1.0), "lr must be a positive number"),
        (dict(lr=True), "lr must be a positive number, got True"),
        (dict(lr=3.5e37), r"lr 3.5e\+37 is above 3.403e\+37, the largest rate whose first Adam step"),
        (dict(lr=1e38, lr_schedule="cosine"), r"lr 1e\+38 is above 3.403e\+37"),
        (dict(final_lr_fraction="a"), r"final_lr_fraction must lie in \(0, 1\], got 'a'"),
        (dict(final_lr_fraction=0.0), r"final_lr_fraction must lie in \(0, 1\], got 0.0"),
        (dict(jit="no"), "jit must be True or False, got 'no'"),
        (dict(jit=1), "jit must be True or False, got 1"),
        (dict(kl_weighting="warmup", kl_warmup_fraction=True), r"kl_warmup_fraction must lie in \(0, 1\], got True"),
        (dict(lr_schedule="linear"), "unknown lr_schedule 'linear'; choose from"),
        (dict(num_particles=0), "num_particles must be a positive integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(guide="nope"), "unknown guide 'nope'"),
        (dict(num_warmup=10), r"method 'svi' takes no option\(s\) \['num_warmup'\]"),
    ],
)
def test_bad_options_are_refused_before_work(toy, options, message):
    with pytest.raises(ValueError, match=message):
        fit(small_model(), toy, progress=False, **options)


def test_schedules_start_at_one_and_end_at_the_fraction():
    for schedule in LRSchedule:
        assert schedule.factor(0, 100, 0.1) == pytest.approx(1.0)
    assert LRSchedule.EXPONENTIAL.factor(100, 100, 0.1) == pytest.approx(0.1)
    assert LRSchedule.COSINE.factor(100, 100, 0.1) == pytest.approx(0.1)
    assert LRSchedule.COSINE.factor(50, 100, 0.0) == pytest.approx(0.5)


def test_the_largest_allowed_lr_runs_to_a_clean_stop(toy):
    """At the bound Adam's first step is finite; what follows overflows the weights and stops as non-finite."""
    bound = torch.finfo(torch.get_default_dtype()).max * (1 - ADAM_BETAS[0])
    with pytest.raises(NonFiniteELBOError, match="SVI stopped at step"):
        fit(small_model(), toy, steps=3, lr=bound, progress=False, num_samples=3)


def test_resuming_a_checkpoint_that_lacks_a_field_names_it(toy, tmp_path):
    options = dict(steps=4, seed=0, progress=False, num_samples=3)
    fit(small_model(), toy, checkpoint_dir=tmp_path, **options)
    payload = torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)
    del payload["permutation"]
    torch.save(payload, tmp_path / CHECKPOINT_FILE)
    with pytest.raises(ValueError, match=r"svi-checkpoint.pt is damaged or from another version: it lacks "
                                         r"\['permutation'\]; start the fit again without resume"):
        fit(small_model(), toy, resume=tmp_path, **options)


@pytest.mark.parametrize("guide", ["autonormal", "meanfield"])
def test_jit_lets_no_deprecation_warning_through(toy, guide):
    """torch 2.13 deprecates the torch.jit.trace that JitTrace_ELBO compiles with; a jit=True fit hides that one, and
    so does the cost estimate, which times the fit's own steps."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(small_model(), toy, guide=guide, steps=3, num_samples=2, jit=True, progress=False)
        step_seconds(small_model(), toy.x_train, toy.y_train, SVIOptions(guide=guide, jit=True))
    assert not [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


def test_the_jit_deprecation_filter_is_narrow():
    raised = [("`torch.jit.trace` is deprecated. Please switch to `torch.compile`", DeprecationWarning),
              ("`torch.jit.script_method` is deprecated", DeprecationWarning),
              ("`torch.jit.trace` is deprecated", UserWarning), ("something else is deprecated", DeprecationWarning)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch_jit_deprecation_ignored():
            for message, category in raised:
                warnings.warn(message, category, stacklevel=1)
    assert [(str(w.message), w.category) for w in caught] == raised[2:]
