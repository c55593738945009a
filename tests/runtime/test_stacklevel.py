"""A warning raised deep in the package points at the user's line."""

from __future__ import annotations

import warnings

import pytest
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.laplace import fit_laplace
from bnn.models import BayesianMLP

from bnn.runtime.stacklevel import user_stacklevel


def test_called_from_outside_the_package_it_points_at_the_caller():
    def report():
        warnings.warn("here", UserWarning, stacklevel=user_stacklevel())

    with pytest.warns(UserWarning) as caught:
        report()
    assert caught[0].filename == __file__  # this module is not in bnn: the warning points at report's line
    assert caught[0].lineno == report.__code__.co_firstlineno + 1


@pytest.mark.parametrize("entry", ["fit", "fit_laplace"])
def test_the_map_polish_warning_of_a_laplace_fit_points_at_the_users_call(entry):
    data = load_toy1d(n_train=20, n_test=5)
    model = BayesianMLP(1, 1, hidden=(3,))
    with pytest.warns(RuntimeWarning, match="the MAP polish .* stopped") as caught:
        if entry == "fit":
            fit(model, data, "laplace", map_steps=1, map_max_iter=1, num_samples=5, progress=False)
        else:
            fit_laplace(model, data.x_train, data.y_train, map_steps=1, map_max_iter=1, num_samples=5, progress=False)
    assert {warning.filename for warning in caught if "MAP polish" in str(warning.message)} == {__file__}
