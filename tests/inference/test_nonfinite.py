"""A non-finite ELBO stops SVI at the step, names the culprits, and keeps the last finite state."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from pyro.infer.autoguide import AutoNormal

from bnn_data import load_toy1d
from inference import fit
from inference.checkpoint import CHECKPOINT_FILE
from inference.cli import main
from inference.nonfinite import NonFiniteELBOError
from models import BayesianMLP

pytestmark = pytest.mark.filterwarnings("ignore:Encountered (NaN|\\+?-?inf)")  # Pyro's own note on the bad loss


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def model():
    return BayesianMLP(1, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": None})


def test_a_nan_elbo_names_the_step_and_the_parameter_and_keeps_the_parameters_before_it(toy, tmp_path):
    options = dict(guide="meanfield", lr=1e10, seed=0, num_draws=7, progress=False)
    with pytest.raises(NonFiniteELBOError) as caught:
        fit(model(), toy, "svi", steps=20, checkpoint_dir=tmp_path, **options)
    error = caught.value
    assert isinstance(error, ValueError) and error.step == 1
    message = str(error)
    assert message.startswith("SVI stopped at step 1: the ELBO became nan; not finite: gradient of parameter 'MeanFieldGuide_")
    assert ".loc_rho'" in message and "lower lr (now 10000000000.0)" in message and "init_rho" in message
    assert f"{tmp_path / CHECKPOINT_FILE} holds its state" in message
    saved = torch.load(error.checkpoint, weights_only=True)
    assert (saved["reason"], saved["step"]) == ("non-finite ELBO at step 1", 1)
    assert len(saved["elbo"]) == 1 and math.isfinite(saved["elbo"][0])
    kept = [value.detach() for value in error.posterior.extras["param_state"]["params"].values()]
    one_step = fit(model(), toy, "svi", steps=1, **options)  # the state after step 0, the last finite one
    expected = [value.detach() for value in one_step.extras["param_state"]["params"].values()]
    for value, stored, reference in zip(kept, saved["params"].values(), expected, strict=True):
        assert torch.isfinite(value).all() and torch.equal(value, stored) and torch.equal(value, reference)
    assert error.posterior.info["stopped"] == "non-finite ELBO at step 1" and error.posterior.num_draws == 7


def test_a_scale_that_underflows_is_the_same_failure_named_at_its_site(toy):
    """AutoNormal's softplus scales reach 0 after one huge step: Pyro's validation refuses the Normal."""
    with pytest.raises(NonFiniteELBOError, match=r"^SVI stopped at step 1: a distribution got an invalid parameter "
                       r"\(Expected parameter scale .*\); not finite: guide site 'layers\.0\.weight_unconstrained' "
                       r"\(log-density\).* error\.posterior holds draws") as caught:
        fit(model(), toy, "svi", lr=1e3, steps=20, seed=0, num_draws=4, progress=False)
    assert caught.value.checkpoint is None and caught.value.posterior.num_draws == 4


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
    assert "SVI stopped at step 1" in capsys.readouterr().err and not (tmp_path / "run").exists()
