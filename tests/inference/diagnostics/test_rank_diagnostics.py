"""The rank-normalised split R-hat and the bulk and tail ESS computed for many quantities at once
(bnn.inference.diagnostics.rank_diagnostics) equal ArviZ's, quantity by quantity, up to rounding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from bnn.inference.diagnostics.rank_diagnostics import ess_bulk, ess_tail, split_r_hat, split_r_hat_parts

from bnn.runtime.lazy_arviz import az


def autoregressive(chains: int, draws: int, quantities: int, phi: float, seed: int) -> np.ndarray:
    """Chains of AR(1) draws :math:`x_t = \\phi x_{t-1} + e_t`: positive ``phi`` makes the autocorrelations decay
    slowly (Geyer's sums run long), negative ones alternate in sign (his pairs stop early)."""
    generator = np.random.default_rng(seed)
    noise = generator.standard_normal((chains, draws, quantities))
    x = np.zeros_like(noise)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def with_edge_quantities(draws: np.ndarray) -> np.ndarray:
    """``draws`` with a constant quantity, one with a NaN draw and one whose chains sit apart."""
    draws = draws.copy()
    draws[:, :, 0] = 2.0
    draws[0, 3, 1] = np.nan
    draws[:, :, 2] += np.arange(draws.shape[0])[:, None] * 3.0
    return draws


CASES = {
    "independent draws, four chains": np.random.default_rng(0).standard_normal((4, 100, 30)),
    "slow mixing": autoregressive(2, 200, 20, 0.9, 1),
    "very slow, odd draws": autoregressive(3, 51, 20, 0.99, 2),
    "alternating": autoregressive(2, 300, 10, -0.6, 3),
    "seven draws": np.random.default_rng(4).standard_normal((2, 7, 5)),
    "ties": np.random.default_rng(5).integers(0, 3, (2, 40, 12)).astype(float),
    "one chain": autoregressive(1, 100, 8, 0.5, 6),
    "constant, NaN and apart": with_edge_quantities(autoregressive(2, 50, 6, 0.3, 7)),
    "three draws": np.random.default_rng(8).standard_normal((2, 3, 4)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_quantity_gets_arvizs_numbers(name):
    draws = CASES[name]
    dataset = az.convert_to_dataset({"f": draws})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns of NaN and short draws, and returns NaN
        expected = {"r_hat": az.rhat(dataset)["f"].values, "bulk": az.ess(dataset, method="bulk")["f"].values,
                    "tail": az.ess(dataset, method="tail")["f"].values,
                    "r_hat bulk": az.rhat(dataset, method="z_scale")["f"].values,
                    "r_hat tail": az.rhat(dataset, method="folded")["f"].values}
    bulk_r_hat, tail_r_hat = split_r_hat_parts(draws)
    found = {"r_hat": split_r_hat(draws), "bulk": ess_bulk(draws), "tail": ess_tail(draws), "r_hat bulk": bulk_r_hat,
             "r_hat tail": tail_r_hat}
    for key, values in expected.items():
        np.testing.assert_allclose(found[key], values, rtol=1e-12, atol=0, equal_nan=True, err_msg=key)
