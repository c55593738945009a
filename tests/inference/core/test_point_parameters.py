"""The MAP stage before a method for a partly Bayesian network (:mod:`bnn.inference.core.point_parameters`): what it
fits, what it sets, what it passes through, and the record entry that lists what it held fixed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from bnn.inference.core.point_parameters import (
    PartlyBayesian,
    check_point_values_set,
    fit_point_parameters,
    held_fixed,
    needs_point_fit,
)
from bnn.inference.core.record import read_record
from bnn.inference.point_estimate import MapOptions, MapRecord
from bnn.models import BayesianMLP, from_module
from torch import nn

X = torch.linspace(-1, 1, 8).reshape(-1, 1)
Y = X.reshape(-1)


def partly_bayesian():
    torch.manual_seed(0)
    return from_module(nn.Sequential(nn.Linear(1, 3), nn.Tanh(), nn.Linear(3, 1)), bayesian="last-layer")


def test_the_stage_fits_the_whole_network_and_sets_the_point_parameters_from_its_draw():
    model = partly_bayesian()
    calls = []

    def map_fit(network, x, y, **options):  # the MAP's posterior: one draw (1, 1, *shape) per site
        calls.append((network, x, y, options))
        return SimpleNamespace(samples={site.name: torch.full((1, 1, *site.shape), float(index))
                                        for index, site in enumerate(network.sites)})

    fitted = fit_point_parameters(model, X, Y, map_fit, {"map_steps": 7})
    (network, x, y, options), = calls
    assert [site.name for site in network.sites] == ["0.weight", "0.bias", "2.weight", "2.bias"]  # all Bayesian
    assert x is X and y is Y and options == {"map_steps": 7}
    assert fitted.held_fixed() == ["0.weight", "0.bias"] and not needs_point_fit(fitted)
    torch.testing.assert_close(fitted.point_values["0.weight"], torch.zeros(3, 1))
    torch.testing.assert_close(fitted.point_values["0.bias"], torch.ones(3))
    assert needs_point_fit(model) and model.point_values is None  # the network given is left alone


def test_a_wholly_bayesian_network_passes_through_untouched():
    mlp, whole = BayesianMLP(1, hidden=(2,)), from_module(nn.Linear(1, 1))
    never = lambda *args, **kwargs: pytest.fail("a MAP stage ran")  # noqa: E731
    assert fit_point_parameters(mlp, X, Y, never, {}) is mlp and fit_point_parameters(whole, X, Y, never, {}) is whole
    assert not isinstance(mlp, PartlyBayesian) and isinstance(whole, PartlyBayesian)
    assert held_fixed(mlp) == [] and held_fixed(whole) == []
    check_point_values_set("svi", mlp)


def test_a_method_refuses_point_parameters_not_set_naming_them():
    with pytest.raises(ValueError, match=r"method 'svi' fits the Bayesian parameters of a partly Bayesian network, whose "
                                         r"parameters \['0.weight', '0.bias'\] must be fitted at a point first"):
        check_point_values_set("svi", partly_bayesian())


def test_the_record_lists_what_was_held_fixed_and_reads_records_written_before_it():
    record = MapRecord(seed=0, train_seconds=1.0, options=MapOptions(), map_lbfgs_iterations=3, map_grad_norm=0.1,
                       map_converged=True, log_likelihood=-1.0, log_joint=-2.0, held_at_map=["0.weight", "0.bias"])
    assert read_record(json.loads(json.dumps(record.to_json()))) == record
    older = {key: value for key, value in record.to_json().items() if key != "held_at_map"}
    assert read_record(older).held_at_map == []
