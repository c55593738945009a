from __future__ import annotations

import json

import arviz as az
import numpy as np
import pytest
import torch
from bnn.datasets import load_dataset, load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.models import BayesianMLP

from tests.support.saved_folders import reseal


@pytest.fixture(scope="module")
def posterior():
    data = load_toy1d(n_train=40, n_test=20)
    model = BayesianMLP(1, 1, hidden=(6,), likelihood={"name": "gaussian", "scale": None}, prior="scale-mixture")
    return fit(model, data, steps=40, num_samples=30, progress=False, seed=5)


def test_inference_data_has_the_groups_and_shapes(posterior):
    idata = posterior.to_inference_data()
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data", "constant_data"):
        assert group in idata.groups()
    assert idata.posterior["layers.0.weight"].shape == (1, 30, 6, 1)
    assert idata.log_likelihood["obs"].shape == (1, 30, 40)
    expected = posterior.pointwise_log_likelihood(posterior.x, posterior.y)
    torch.testing.assert_close(torch.as_tensor(idata.log_likelihood["obs"].values), expected.double())
    assert az.loo(idata).elpd_loo < 0


def test_save_load_round_trip_keeps_numbers(posterior, tmp_path):
    posterior.save(tmp_path / "run")
    loaded = Posterior.load(tmp_path / "run")
    assert loaded.model.config() == posterior.model.config()
    assert all(torch.equal(loaded.samples[k], posterior.samples[k]) for k in posterior.samples)
    x = torch.linspace(-2, 2, 7).unsqueeze(-1)
    torch.testing.assert_close(loaded.predict(x).mean, posterior.predict(x).mean)
    assert loaded.record.elbo == posterior.record.elbo
    with pytest.raises(ValueError, match="holds a result of `Posterior.save`; choose another folder"):
        posterior.save(tmp_path / "run")


def test_a_save_without_room_for_the_posterior_is_refused_and_keeps_the_old_one(posterior, tmp_path, monkeypatch):
    posterior.save(tmp_path / "run")
    before = (tmp_path / "run" / "posterior.nc").read_bytes()
    monkeypatch.setattr("shutil.disk_usage", lambda folder: type("usage", (), {"free": 2**20})())
    with pytest.raises(ValueError, match=r"the posterior \(posterior.nc\) needs about 1.\d MiB in .*, and its file system "
                                         r"has 1.0 MiB free: free space there or choose another --out"):
        posterior.save(tmp_path / "run", overwrite=True)
    assert (tmp_path / "run" / "posterior.nc").read_bytes() == before


def test_loading_a_damaged_or_foreign_folder_says_what_is_wrong(posterior, tmp_path):
    with pytest.raises(ValueError, match="fit.json is missing"):
        Posterior.load(tmp_path)
    posterior.save(tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "fit.json").read_text())
    (tmp_path / "run" / "fit.json").write_text(json.dumps({**meta, "schema_version": 99}))
    with pytest.raises(ValueError, match="schema version 99; this version reads 3"):
        Posterior.load(tmp_path / "run")
    (tmp_path / "run" / "fit.json").write_text("{not json")
    with pytest.raises(ValueError, match="fit.json is damaged"):
        Posterior.load(tmp_path / "run")
    (tmp_path / "run" / "fit.json").write_text(json.dumps(meta))
    (tmp_path / "run" / "posterior.nc").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="posterior.nc is not the file this fit wrote: its SHA-256 differs"):
        Posterior.load(tmp_path / "run")
    reseal(tmp_path / "run")
    with pytest.raises(ValueError, match="posterior.nc cannot be read"):
        Posterior.load(tmp_path / "run")


@pytest.fixture
def saved(tmp_path):
    """A saved Laplace fit: it has every file a posterior folder can hold (linearization.pt too)."""
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1})
    return fit(model, data, "laplace", map_steps=50, num_samples=10, progress=False, seed=1).save(tmp_path / "run")


def _write_fit_json(folder, payload):
    (folder / "fit.json").write_text(json.dumps(payload))


def _without_record_field(folder, name):
    meta = json.loads((folder / "fit.json").read_text())
    return {**meta, "record": {key: value for key, value in meta["record"].items() if key != name}}


def _without_model_field(folder, name):
    meta = json.loads((folder / "fit.json").read_text())
    return {**meta, "model": {key: value for key, value in meta["model"].items() if key != name}}


def _with_record_field(folder, name, value):
    meta = json.loads((folder / "fit.json").read_text())
    return {**meta, "record": {**meta["record"], name: value}}


@pytest.mark.long
@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda run: _write_fit_json(run, {key: value for key, value in json.loads((run / "fit.json").read_text()).items()
                                           if key != "model"}),
         r"fit.json is damaged or from another version: its model or record entry is missing .*KeyError: 'model'.*"
         "fit and save the posterior again"),
        (lambda run: _write_fit_json(run, _without_record_field(run, "method")),
         r"fit.json is damaged or from another version: .*the fit record must be a JSON object with a 'method'"),
        (lambda run: _write_fit_json(run, _without_record_field(run, "map_grad_norm")),
         r"fit.json is damaged .*the laplace record lacks the field\(s\) \['map_grad_norm'\] of LaplaceRecord"),
        (lambda run: _write_fit_json(run, _with_record_field(run, "seed", "zero")),
         r"fit.json is damaged .*field 'the laplace record.seed' must be an integer, got 'zero'"),
        (lambda run: _write_fit_json(run, {**json.loads((run / "fit.json").read_text()), "model": {"in_features": 1}}),
         r"fit.json is damaged or from another version: .*the config of a 'mlp' network lacks \['likelihood', 'prior'\]"),
        (lambda run: _write_fit_json(run, {**json.loads((run / "fit.json").read_text()), "model": [1, 2]}),
         r"fit.json is damaged or from another version: .*a network's config must be a JSON object, got list"),
        (lambda run: _write_fit_json(run, _without_model_field(run, "hidden")),
         r"fit.json is damaged .*the config of a 'mlp' network must give the arguments \['activation', 'hidden', "
         r"'in_features', 'out_features'\], got \['activation', 'in_features', 'out_features'\]"),
        (lambda run: (run / "fit.json").write_bytes(bytes(range(256))), r"fit.json is damaged \(UnicodeDecodeError"),
        (lambda run: az.from_dict(posterior={"w": torch.zeros(1, 3).numpy()}).to_netcdf(str(run / "posterior.nc")),
         r"posterior.nc does not hold the draws and data of the model in .*fit.json"),
        (lambda run: (run / "linearization.pt").write_bytes(b"PK\x03\x04 not a zip"),
         r"linearization.pt cannot be read as a linearisation \(\w+\); it is damaged or from another version"),
        (lambda run: torch.save({"mean": torch.zeros(3)}, run / "linearization.pt"),
         r"linearization.pt does not hold a linearisation for this model \(KeyError: 'scale'\)"),
        (lambda run: torch.save([1, 2], run / "linearization.pt"),
         r"linearization.pt does not hold a linearisation for this model \(TypeError"),
        (lambda run: (run / "linearization.pt").unlink(),
         r"linearization.pt is missing: this Laplace fit predicts through its linearised predictive"),
        (lambda run: fit(BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.1}), load_toy1d(n_train=30),
                         "map", map_steps=5, progress=False).to_netcdf(run / "posterior.nc"),
         r"posterior.nc holds the draws of a map fit \(guide None\), .*fit.json the record of a laplace fit \(guide "
         r"laplace\): the files are from different fits"),
        (lambda run: (run / "fit.json").write_text((run / "fit.json").read_text().replace(
            '"seed": 1', '"seed": NaN')), r"fit.json is damaged \(ValueError: NaN is not a JSON number\)"),
    ],
    ids=["no model entry", "record without method", "record without a field", "record with a wrong type",
         "partial model entry", "model entry not an object",
         "model entry without an argument", "binary fit.json", "foreign posterior.nc",
         "damaged linearization", "linearization without scale", "linearization not a dict", "linearization missing",
         "another method's posterior.nc", "NaN in fit.json"],
)
def test_each_damaged_file_is_named_with_what_to_do(saved, damage, message):
    damage(saved)
    reseal(saved)  # the digests agree, so each check behind them is reached
    with pytest.raises(ValueError, match=message) as error:
        Posterior.load(saved)
    assert "weights_only" not in str(error.value)  # torch's advice to unpickle with code execution is not passed on


def _damage_netcdf(folder, change):
    """Rewrite ``posterior.nc`` in ``folder`` after ``change(idata)``."""
    idata = az.from_netcdf(str(folder / "posterior.nc"))
    idata.load()
    change(idata)
    (folder / "posterior.nc").unlink()
    idata.to_netcdf(str(folder / "posterior.nc"))


def _nan_draw(idata):
    idata.posterior["layers.0.weight"].values[0, 1] = float("nan")


def _nan_target(idata):
    idata.observed_data["obs"].values[4] = float("nan")


def _short_targets(idata):
    idata.observed_data = idata.observed_data.isel({idata.observed_data["obs"].dims[0]: slice(0, 5)})


def _cut_site(idata):
    idata.posterior = idata.posterior.isel({idata.posterior["layers.0.weight"].dims[2]: slice(0, 2)})


@pytest.mark.long
@pytest.mark.parametrize("damage, message", [
    (lambda run: _write_fit_json(run, {**json.loads((run / "fit.json").read_text()), "extra": 1}),
     r"fit.json has unknown entries \['extra'\]; it holds \['files', 'model', 'record', 'schema_version'\]"),
    (lambda run: _damage_netcdf(run, _nan_draw),
     r"posterior.nc: the draws of 'layers.0.weight' hold 3 NaN of 30 values; the file is damaged"),
    (lambda run: _damage_netcdf(run, _nan_target),
     r"posterior.nc: its training data \(constant_data 'x', observed_data 'obs'\) is damaged: targets y contains NaN"),
    (lambda run: _damage_netcdf(run, _short_targets),
     r"posterior.nc: its training data .* is damaged: inputs and targets differ in length: x has 30 rows, y has 5"),
    (lambda run: _damage_netcdf(run, _cut_site),
     r"posterior.nc: the draws of 'layers.0.weight' have shape \(1, 10, 2, 1\); the model in fit.json needs "
     r"\(chains, draws, \*\(3, 1\)\)"),
], ids=["unknown fit.json entry", "NaN draw", "NaN target", "fewer targets than inputs", "draws of another shape"])
def test_loading_checks_every_draw_and_the_data_naming_the_file(saved, damage, message):
    damage(saved)
    reseal(saved)
    with pytest.raises(ValueError, match=message):
        Posterior.load(saved)


def test_predicting_at_inputs_off_the_cpu_says_how_to_move_them(posterior):
    with pytest.raises(ValueError, match=r"inputs x is on the 'meta' device; the collection takes data on the CPU: .* x.cpu\(\)"):
        posterior.predict(torch.ones(3, 1, device="meta"))


def test_saving_where_a_file_stands_names_the_file(posterior, tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(ValueError, match=r"taken is a file, not a folder; choose another folder path"):
        posterior.save(tmp_path / "taken")
    with pytest.raises(ValueError, match=r"taken is a file, not a folder, so the folder .*taken/run cannot be made"):
        posterior.save(tmp_path / "taken" / "run")


def test_draws_thin_evenly_and_refuse_more_than_held(posterior):
    assert posterior.draws(10)["layers.0.bias"].shape == (10, 6)
    torch.testing.assert_close(posterior.draws(30)["sigma"], posterior.samples["sigma"][0])
    with pytest.raises(ValueError, match=r"num_samples must be an integer in 1..30"):
        posterior.draws(31)


def test_predictive_std_is_the_law_of_total_variance(posterior):
    x = torch.linspace(-1, 1, 5).unsqueeze(-1)
    prediction = posterior.predict(x)
    f = prediction.f[..., 0]
    sigma = posterior.draws()["sigma"].unsqueeze(-1)
    expected = (f.var(0, unbiased=False) + (sigma**2).mean(0)).sqrt()
    torch.testing.assert_close(prediction.std, expected)
    torch.testing.assert_close(prediction.mean, f.mean(0))
    assert prediction.epistemic_std.shape == (5,) and torch.all(prediction.epistemic_std <= prediction.std)


def test_the_same_posterior_predicts_the_same_draws(posterior):
    x = torch.zeros(3, 1)
    assert torch.equal(posterior.predict(x).draws, posterior.predict(x).draws)
    assert not torch.equal(posterior.predict(x, seed=1).draws, posterior.predict(x, seed=2).draws)


@pytest.mark.long
def test_classification_metrics_in_the_right_ranges():
    data = load_dataset("breast_cancer")
    model = BayesianMLP(data.in_features, 1, hidden=(8,), likelihood="bernoulli")
    metrics = evaluate(fit(model, data, steps=300, lr=0.02, progress=False, num_samples=100), data)
    assert set(metrics) == {"test_accuracy", "test_ll", "ece", "roc_auc", "brier", "mce", "ece_mass", "mce_mass",
                            "entropy", "mutual_information", "aurc"}
    assert metrics["test_accuracy"] > 0.9 and metrics["roc_auc"] > 0.95 and 0 <= metrics["ece"] < 0.2


def test_intervals_of_a_posterior_with_few_draws_come_from_many_observation_draws():
    """Five equal weight draws and a known noise sd 0.3: the predictive is exactly N(f, 0.3^2), so the 90% interval is
    f -+ 1.645 * 0.3. Its ends are quantiles of 5 * 200 draws: sd about sqrt(0.05 * 0.95 / 1000) / phi(1.645) = 0.067
    noise sds, and the test allows 4 of them (with one draw per weight draw, 5 numbers, the interval would be far off)."""
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    fitted = fit(model, data, steps=5, num_samples=5, progress=False)
    same = {name: value[:, :1].expand(1, 5, *value.shape[2:]).clone() for name, value in fitted.samples.items()}
    prediction = Posterior(model, same, fitted.x, fitted.y, fitted.record).predict(data.x_test, seed=3)
    assert prediction.draws.shape == (1000, 10)
    low, high = prediction.interval(0.9)
    f = prediction.f[0, :, 0]
    torch.testing.assert_close(low, f - 1.645 * 0.3, atol=4 * 0.067 * 0.3, rtol=0)
    torch.testing.assert_close(high, f + 1.645 * 0.3, atol=4 * 0.067 * 0.3, rtol=0)


def test_the_saved_file_keeps_the_draws_and_a_float32_log_likelihood_and_no_predictive_draws(posterior, tmp_path):
    posterior.save(tmp_path / "run")
    saved = az.from_netcdf(str(tmp_path / "run" / "posterior.nc"))
    assert "posterior_predictive" not in saved.groups()
    assert saved.log_likelihood["obs"].dtype == "float32"
    torch.testing.assert_close(torch.as_tensor(saved.log_likelihood["obs"].values),
                               posterior.pointwise_log_likelihood(posterior.x, posterior.y))


def test_a_save_without_the_log_likelihood_leaves_it_out_and_the_loaded_posterior_remakes_it(posterior, tmp_path):
    posterior.save(tmp_path / "whole")
    posterior.save(tmp_path / "draws", log_likelihood=False)
    saved = az.from_netcdf(str(tmp_path / "draws" / "posterior.nc"))
    assert "log_likelihood" not in saved.groups() and "posterior" in saved.groups()
    rows, draws = posterior.x.shape[0], posterior.num_chains * posterior.num_draws
    smaller = (tmp_path / "whole" / "posterior.nc").stat().st_size - (tmp_path / "draws" / "posterior.nc").stat().st_size
    assert smaller >= 0.8 * 4 * rows * draws  # the float32 log-likelihood's bytes, less what compression saves
    loaded = Posterior.load(tmp_path / "draws")
    assert all(torch.equal(loaded.samples[k], posterior.samples[k]) for k in posterior.samples)
    torch.testing.assert_close(loaded.to_inference_data().log_likelihood["obs"].values,
                               posterior.to_inference_data().log_likelihood["obs"].values)


@pytest.mark.long
def test_each_saved_draw_costs_its_weights_and_one_float32_log_likelihood_per_row(tmp_path):
    data = load_toy1d(n_train=200, n_test=10)
    model = BayesianMLP(1, 1, hidden=(6,), likelihood={"name": "gaussian", "scale": None})
    sizes = {}
    for draws in (100, 1100):
        fit(model, data, steps=5, num_samples=draws, progress=False).save(tmp_path / str(draws))
        sizes[draws] = (tmp_path / str(draws) / "posterior.nc").stat().st_size
    per_draw = 4 * (200 + 6 + 6 + 6 + 1 + 1)  # float32: a log-likelihood per row, then the weights and sigma
    # with the predictive draws (float32) and a float64 log-likelihood each draw would cost 4 * 200 + 8 * 200 more
    assert 0.8 * per_draw < (sizes[1100] - sizes[100]) / 1000 < 1.25 * per_draw


def test_the_predictive_is_computed_a_batch_of_draws_at_a_time_with_the_same_numbers(posterior, monkeypatch):
    x = torch.linspace(-2, 2, 50).unsqueeze(-1)
    whole = posterior.predict(x, seed=3)
    calls = []
    forward = posterior.model.forward
    monkeypatch.setattr(posterior.model, "forward", lambda x, values: calls.append(len(next(iter(values.values()))))
                        or forward(x, values))
    widest = max(posterior.model.hidden)
    monkeypatch.setattr("bnn.models.draw_batches.VALUES_PER_BATCH", 7 * x.shape[0] * widest)  # 7 draws a batch
    batched = posterior.predict(x, seed=3)
    total = posterior.num_chains * posterior.num_draws
    assert calls == [7] * (total // 7) + ([total % 7] if total % 7 else [])
    torch.testing.assert_close(batched.mean, whole.mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(batched.draws, whole.draws, rtol=1e-6, atol=1e-6)


def test_log_likelihood_does_not_depend_on_the_batch_of_draws(posterior, monkeypatch):
    whole = posterior.to_inference_data()
    widest = max(posterior.model.hidden)
    monkeypatch.setattr("bnn.models.draw_batches.VALUES_PER_BATCH", 7 * posterior.x.shape[0] * widest)  # 7 draws a batch
    batched = posterior.to_inference_data()
    np.testing.assert_array_equal(batched.log_likelihood["obs"].values, whole.log_likelihood["obs"].values)
    assert batched.posterior_predictive["obs"].shape == whole.posterior_predictive["obs"].shape
