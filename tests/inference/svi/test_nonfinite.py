"""A non-finite ELBO stops SVI at the step, names the culprits, and keeps the last finite state."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE
from bnn.inference.svi.nonfinite import NonFiniteELBOError
from bnn.models import BayesianMLP
from pyro.infer.autoguide import AutoNormal

from bnn.cli.main import main

pytestmark = pytest.mark.filterwarnings("ignore:Encountered (NaN|\\+?-?inf)")  # Pyro's own note on the bad loss


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def model():
    return BayesianMLP(1, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": None})


def held_noise_model():
    """:func:`model` with the noise held at 0.1: only the weights' parameters can overflow."""
    return BayesianMLP(1, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": 0.1})


def test_a_nan_elbo_names_the_step_and_the_parameter_and_keeps_the_parameters_before_it(toy, tmp_path):
    options = dict(guide="meanfield", guide_options={"local_reparameterisation": False}, lr=1e10, lr_schedule="constant",
                   jit=False, seed=0, num_samples=7, progress=False)
    held_noise = held_noise_model()
    with pytest.raises(NonFiniteELBOError) as caught:
        fit(held_noise, toy, "svi", steps=20, checkpoint_dir=tmp_path, **options)
    error = caught.value
    assert isinstance(error, ValueError) and error.step == 1
    message = str(error)
    assert re.match(r"SVI stopped at step 1: the ELBO became (nan|-inf); not finite: gradient of parameter 'MeanFieldGuide_",
                    message)
    assert ".loc_rho'" in message and "lower lr (now 10000000000.0)" in message and "init_rho" in message
    assert f"{tmp_path / CHECKPOINT_FILE} holds its state" in message
    saved = torch.load(error.checkpoint, weights_only=True)
    assert (saved["reason"], saved["step"]) == ("non-finite ELBO at step 1", 1)
    assert len(saved["elbo"]) == 1 and math.isfinite(saved["elbo"][0])
    fit(held_noise, toy, "svi", steps=1, checkpoint_dir=tmp_path / "one", **options)  # step 0's update: finite draws
    # the state after step 0, the last finite one, from the checkpoint the 1-step fit wrote when it finished
    expected = list(torch.load(tmp_path / "one" / CHECKPOINT_FILE, weights_only=True)["params"].values())
    kept = [value.detach() for value in error.posterior.extras["param_state"]["params"].values()]
    for value, stored, reference in zip(kept, saved["params"].values(), expected, strict=True):
        assert torch.isfinite(value).all() and torch.equal(value, stored) and torch.equal(value, reference)
    assert error.posterior.record.stopped == "non-finite ELBO at step 1" and error.posterior.num_draws == 7


def test_a_scale_that_underflows_is_the_same_failure_named_at_its_site(toy):
    """AutoNormal's softplus scales reach 0 after one huge step: Pyro's validation refuses the Normal (the noise held,
    so that only the weights' scales go)."""
    held_noise = held_noise_model()
    with pytest.raises(NonFiniteELBOError, match=r"^SVI stopped at step 1: a distribution got an invalid parameter "
                       r"\(Expected parameter scale .*\); not finite: guide site 'layers\.0\.weight_unconstrained' "
                       r"\(log-density\).* error\.posterior holds draws") as caught:
        fit(held_noise, toy, "svi", guide="autonormal", lr=1e3, lr_schedule="constant", jit=False, steps=20, seed=0,
            num_samples=4, progress=False)
    assert caught.value.checkpoint is None and caught.value.posterior.num_draws == 4
    assert all(torch.isfinite(value).all() for value in caught.value.posterior.samples.values())


def test_an_error_no_non_finite_number_explains_is_raised_unchanged(toy):
    net = model()
    guide, calls = AutoNormal(net), itertools.count(1)

    def failing_guide(x, y=None, num_data=None):
        if next(calls) == 3:
            raise ValueError("a bug in the guide")
        return guide(x, y, num_data=num_data)

    with pytest.raises(ValueError, match="^a bug in the guide") as caught:
        fit(net, toy, "svi", guide=failing_guide, steps=10, progress=False)
    assert not isinstance(caught.value, NonFiniteELBOError)


def test_the_command_line_reports_it_as_a_clean_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--dataset", "toy1d", "--hidden", "5", "--guide", "meanfield", "--lr", "1e10", "--steps", "20",
              "--quiet", "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: SVI stopped at step 1") and err.count("\n") == 1 and "Traceback" not in err
    # step 0's update already sends the noise's draws out of range: no posterior, the checkpoint is kept
    assert "no posterior is kept" in err and f"{tmp_path / 'run'} keeps this run's checkpoint" in err
    assert (tmp_path / "run" / "checkpoint" / CHECKPOINT_FILE).is_file()
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_step_that_overflows_the_guide_is_refused_by_name_and_keeps_no_invalid_posterior(tmp_path):
    """lr = 1e30: step 0's loss is finite, its update sends the noise scale's draws to infinity. As the last step,
    that is refused by name; before a failing step 1, the state it left (draws of sigma at infinity) is not offered as
    a posterior, and the command line writes no result."""
    model = BayesianMLP(1, 1, hidden=(2,), likelihood={"name": "gaussian", "scale": None})
    options = dict(guide="autonormal", lr=1e30, lr_schedule="constant", jit=False, num_samples=4, progress=False)
    with pytest.raises(ValueError, match=r"after step 1 the guide's draws of \['sigma'\] are not finite") as error:
        fit(model, load_toy1d(), "svi", steps=1, **options)
    assert "lower lr (now 1e+30)" in str(error.value)
    with pytest.raises(NonFiniteELBOError, match="no posterior is kept: the draws of the parameters before that step "
                       "are not finite") as error:
        fit(model, load_toy1d(), "svi", steps=2, **options)
    assert error.value.step == 1 and error.value.posterior is None
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--quiet", "--hidden", "2", "--steps", "2", "--num-samples", "4", "--lr", "1e30", "--guide", "autonormal",
              "--lr-schedule", "constant", "--no-jit", "--out", str(out)])
    assert exit_info.value.code == 2 and not (out / "posterior.nc").exists()
