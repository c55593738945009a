"""The typed fit records: written as JSON, read back strictly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from bnn.inference.core.record import RECORDS, read_record
from bnn.inference.diagnostics.convergence import ChainDiagnostics
from bnn.inference.laplace import LaplaceOptions, LaplaceRecord
from bnn.inference.nuts import NUTSOptions, NUTSRecord
from bnn.inference.svi import SVIOptions, SVIRecord

from bnn.runtime.atomic import write_json

DIAGNOSTICS = ChainDiagnostics(r_hat_max=1.2, r_hat_predictive=1.005, ess_bulk_min=40.0, ess_tail_min=35.5, divergences=0,
                               ess_predictive_min=120.0, num_chains=2,
                               converged=False)
NUTS = NUTSRecord(seed=1, train_seconds=2.5, num_chains=2, init="prior", chain_method="parallel", potential="flat",
                  options=NUTSOptions(num_warmup=10, num_samples=10, max_tree_depth=5, engine="nutpie"), chain_seeds=[3, 4],
                  chain_seconds=[1.0, 1.5], chain_gradients=[10, 12], gradient_evaluations=22, diagnostics=DIAGNOSTICS,
                  chains_kept=[0, 1], dataset="toy1d")
SVI = SVIRecord(seed=0, train_seconds=1.0, guide="meanfield", first_step_seconds=0.1, steps=3, batch_size=5,
                options=SVIOptions(lr_schedule="constant", jit=False, checkpoint_dir="runs/checkpoint"), final_elbo=-3.0,
                elbo=[-5.0, -4.0, -3.0], stopped="non-finite ELBO at step 3")
LAPLACE = LaplaceRecord(seed=0, train_seconds=1.0, guide="laplace", map_seconds=0.5,
                        options=LaplaceOptions(structure="diag", map_steps=10), num_weights_covered=7, map_lbfgs_iterations=4,
                        map_grad_norm=0.5, map_converged=False,
                        log_marginal_likelihood=-10.0, prior_precision={"layers.0.weight": 1.0}, prior_precision_multiplier=1.0,
                        tune_prior_precision=False)


@pytest.mark.parametrize("record", [NUTS, SVI, LAPLACE], ids=["nuts", "svi", "laplace"])
def test_every_record_round_trips_through_json(record):
    assert set(RECORDS) >= {"svi", "nuts", "laplace"}
    assert read_record(json.loads(json.dumps(record.to_json()))) == record


def test_a_record_labels_its_fit_by_its_method_and_an_svi_fit_by_its_guide_too():
    assert (NUTS.label, SVI.label, LAPLACE.label) == ("nuts", "svi (meanfield)", "laplace")


def test_a_record_holds_its_options_and_writes_them_as_json_holds_them():
    assert SVI.to_json()["options"]["checkpoint_dir"] == "runs/checkpoint" and SVI.options.lr == 0.01
    assert LAPLACE.to_json()["options"]["structure"] == "diag" and LAPLACE.metrics()["structure"] == "diag"


def test_records_give_their_verdicts_problems_and_metrics():
    assert NUTS.converged is False and DIAGNOSTICS.chains_agree is True
    assert NUTS.metrics() == {**vars(DIAGNOSTICS), "engine": "nutpie"}
    assert SVI.converged is None and SVI.problems() == ["SVI stopped early: non-finite ELBO at step 3"]
    assert SVI.metrics() == {"final_elbo": -3.0, "stopped": "non-finite ELBO at step 3"}
    assert LAPLACE.converged is False and "the MAP did not converge" in LAPLACE.problems()[0]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("method"), r"must be a JSON object with a 'method'"),
    (lambda d: d.update(method="hmc"), r"unknown method 'hmc'; this version knows \[.*'laplace', .*'nuts', .*'svi', 'swag'\]"),
    (lambda d: d.pop("chain_seeds"), r"the nuts record lacks the field\(s\) \['chain_seeds'\] of NUTSRecord"),
    (lambda d: d.update(colour="red"), r"the nuts record has unknown field\(s\) \['colour'\]"),
    (lambda d: d.update(num_chains="2"), r"field 'the nuts record.num_chains' must be an integer, got '2'"),
    (lambda d: d["options"].update(dense_mass=0), r"field 'the nuts record.options.dense_mass' must be true or false, got 0"),
    (lambda d: d["options"].update(engine="stan"), r"unknown engine 'stan'; choose from \['nutpie', 'pyro'\]"),
    (lambda d: d["options"].update(thin=2), r"the nuts record.options has unknown field\(s\) \['thin'\]"),
    (lambda d: d.update(chain_seeds=None), r"field 'the nuts record.chain_seeds' is null but must hold a value"),
    (lambda d: d["diagnostics"].pop("converged"), r"the nuts record.diagnostics lacks the field\(s\) \['converged'\]"),
    (lambda d: d.update(chain_seeds=[3, "4"]), r"field 'the nuts record.chain_seeds' must be a list whose every item "
                                               r"is an integer, got the item '4'"),
    (lambda d: d.update(chain_seconds=[1.0, "slow"]), r"'the nuts record.chain_seconds' must be a list whose every item is a"),
])
def test_a_damaged_record_names_what_is_wrong(change, message):
    data = NUTS.to_json()
    change(data)
    with pytest.raises(ValueError, match=message):
        read_record(data)


def test_a_nan_survives_the_round_trip():
    data = json.loads(json.dumps({**SVI.to_json(), "final_elbo": math.nan}))
    assert math.isnan(read_record(data).final_elbo)


def test_null_numbers_read_back_as_nan_and_json_stays_strict(tmp_path):
    record = SVIRecord(**{**vars(SVI), "final_elbo": math.nan, "elbo": [-5.0, math.inf, math.nan]})
    write_json(tmp_path / "fit.json", record.to_json())
    text = (tmp_path / "fit.json").read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))  # a strict parser
    assert data["final_elbo"] is None and data["elbo"] == [-5.0, None, None]
    again = read_record(data)
    assert math.isnan(again.final_elbo) and again.elbo[0] == -5.0 and all(math.isnan(v) for v in again.elbo[1:])


def test_numpy_and_non_finite_numbers_are_written_as_strict_json(tmp_path):
    write_json(tmp_path / "m.json", {"a": np.float32("nan"), "b": [np.float64(1.5), -math.inf], "c": {"d": np.int64(3)}})
    text = (tmp_path / "m.json").read_text()
    assert json.loads(text, parse_constant=lambda name: pytest.fail(name)) == {"a": None, "b": [1.5, None], "c": {"d": 3}}
