"""The memory check of :mod:`bnn.runtime.memory`: the bytes each method needs, refused with the numbers."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from bnn.inference import METHODS, fit
from bnn.inference.laplace.curvature import FULL_MATRICES_AT_PEAK
from bnn.models import BayesianMLP

from bnn.runtime import memory

X, Y = torch.randn(20, 1), torch.randn(20)


def small_model() -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})  # D = 3 + 3 + 3 + 1 + sigma


def test_the_parameters_and_the_activations_are_counted_exactly():
    assert memory.parameter_count(small_model()) == 11
    assert memory.parameter_count(BayesianMLP(4, 2, hidden=(5, 6))) == 4 * 5 + 5 + 5 * 6 + 6 + 6 * 2 + 2
    assert memory.network_needs(small_model(), 20) == {"activations on the data": 2 * 20 * (1 + 3 + 1) * 4}


def test_what_svi_keeps_is_its_guide_with_adam_and_its_draws():
    options = METHODS.get("svi").options.parse("svi", {"num_samples": 10, "num_particles": 2})
    assert options.memory_needs(small_model()) == {"guide, its gradients and Adam's moments (8 D)": 8 * 11 * 4,
                                                  "2 particle draws": 2 * 11 * 4, "10 posterior draws": 10 * 11 * 4}


def test_nuts_keeps_every_chains_draws_in_float64():
    options = METHODS.get("nuts").options.parse("nuts", {"num_chains": 3, "num_warmup": 5, "num_samples": 7})
    assert options.memory_needs(small_model()) == {"3 chains x 12 draws (warmup included, float64)": 3 * 12 * 11 * 8}


@pytest.mark.parametrize("method", METHODS.names())
def test_every_method_refuses_a_fit_the_machine_cannot_hold_before_any_work(method, monkeypatch):
    monkeypatch.setattr(memory, "machine_memory", lambda: (4 * 2**30, 1000))  # 1000 bytes available
    def no_work(*args):
        raise AssertionError("the fit started")

    monkeypatch.setitem(METHODS._entries, method, dataclasses.replace(METHODS.get(method), run=no_work))
    with pytest.raises(ValueError, match=rf"method '{method}' needs at least .* GiB for this model and data "
                                         r"\(activations on the data .*\), but this machine has 9.31e-07 GiB available "
                                         r"of 4 GiB; use smaller hidden widths"):
        fit(small_model(), (X, Y), method)


def test_a_network_of_four_billion_units_is_refused_with_the_numbers():
    width = 4_000_000_000
    huge = BayesianMLP(1, 1, hidden=(width,), likelihood={"name": "gaussian", "scale": None})
    parameters = 3 * width + 1 + 1
    needed = 4 * (2 * 20 * (1 + width + 1) + (8 + 1 + 1000) * parameters)  # activations, guide and Adam, draws
    assert needed / 2**30 > memory.machine_memory()[0] / 2**30  # more than this machine holds in all
    with pytest.raises(ValueError, match=re.escape(f"method 'svi' needs at least {needed / 2**30:.3g} GiB for this")):
        fit(huge, (X, Y), "svi")


def test_a_map_fit_counts_its_polish_at_its_peak():
    options = METHODS.get("map").options.parse("map", {})
    small, wide = small_model(), BayesianMLP(5000, 1, hidden=(2,))  # D = 11 and 10,005
    assert options.memory_needs(small) == {"the MAP fit's polish: L-BFGS's history ((2 x 100 + 4) D), float64":
                                           204 * 11 * 8}  # above 11**2
    assert options.memory_needs(BayesianMLP(40, 1, hidden=(30,))) == {
        "the MAP fit's polish: the Gauss-Newton precision (D^2), float64": 1261**2 * 8}
    assert sum(options.memory_needs(wide).values()) == 204 * 10_005 * 8  # L-BFGS: no dense precision above 4,096


def test_laplace_counts_the_larger_of_its_map_fit_and_its_curvature():
    diag = METHODS.get("laplace").options.parse("laplace", {"structure": "diag", "num_samples": 10})
    assert diag.memory_needs(small_model()) == {"the MAP fit's polish: L-BFGS's history ((2 x 100 + 4) D), float64":
                                                204 * 11 * 8}  # more than the curvature (11) and 10 draws
    full = METHODS.get("laplace").options.parse("laplace", {"num_samples": 10})
    model = BayesianMLP(40, 1, hidden=(30,))  # D = 1,261: the curvature D^2 and the draws beat the polish's D^2
    assert full.memory_needs(model) == {"the full curvature (float64)": FULL_MATRICES_AT_PEAK * 1261**2 * 8,
                                        "10 posterior draws": 10 * 1261 * 4}


def test_an_ensemble_counts_the_members_fitted_at_once_and_every_members_weights():
    sequential = METHODS.get("ensemble").options.parse("ensemble", {"num_members": 3, "member_method": "sequential"})
    parallel = dataclasses.replace(sequential, member_method="parallel")
    one_fit = 204 * 11 * 8
    assert sequential.memory_needs(small_model()) == {
        "1 members fitted at once, each the MAP fit's polish: L-BFGS's history ((2 x 100 + 4) D), float64": one_fit,
        "3 members' weights (float64)": 3 * 11 * 8}
    assert sum(parallel.memory_needs(small_model()).values()) == parallel.workers() * one_fit + 3 * 11 * 8


@pytest.mark.parametrize("method", METHODS.names())
def test_a_million_input_columns_are_refused_before_any_work(method, monkeypatch):
    monkeypatch.setattr(memory, "machine_memory", lambda: (24 * 2**30, 20 * 2**30))  # this machine's

    def no_work(*args):
        raise AssertionError("the fit started")

    monkeypatch.setitem(METHODS._entries, method, dataclasses.replace(METHODS.get(method), run=no_work))
    wide = BayesianMLP(1_000_000, 1, hidden=(50,))  # D = 50,000,101: the map fit's L-BFGS history alone is 76 GiB
    with pytest.raises(ValueError, match=rf"method '{method}' needs at least .* GiB .* but this machine has 20 GiB"):
        fit(wide, (torch.randn(2, 1_000_000), torch.randn(2)), method)
