"""Bad priors, data and options fail with a message that names the problem, before any work starts."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.inference.cavi import NormalGammaPrior, exact_posterior, fit_cavi


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(mean=torch.zeros(2, 1), covariance=torch.eye(2)), "mean must be a vector"),
        (dict(mean=torch.zeros(2), covariance=torch.eye(3)), r"covariance must have shape \(2, 2\)"),
        (dict(mean=torch.zeros(2), covariance=torch.tensor([[1.0, 0.5], [0.0, 1.0]])), "must be symmetric"),
        (dict(mean=torch.zeros(2), covariance=torch.tensor([[1.0, 2.0], [2.0, 1.0]])), "positive definite"),
        (dict(mean=torch.tensor([0.0, math.nan]), covariance=torch.eye(2)), "contains NaN"),
        (dict(mean=torch.zeros(2), covariance=torch.eye(2), shape=0.0), "shape must be a positive number"),
        (dict(mean=torch.zeros(2), covariance=torch.eye(2), rate=-1.0), "rate must be a positive number"),
    ],
)
def test_bad_prior(arguments, message):
    with pytest.raises(ValueError, match=message):
        NormalGammaPrior(**arguments)


@pytest.mark.parametrize(
    "arguments, message",
    [(dict(num_features=0), "num_features must be a positive integer"), (dict(num_features=2, scale=0), "scale")],
)
def test_bad_isotropic_prior(arguments, message):
    with pytest.raises(ValueError, match=message):
        NormalGammaPrior.isotropic(**arguments)


X, Y, PRIOR = torch.ones(4, 2), torch.zeros(4), NormalGammaPrior.isotropic(2)


@pytest.mark.parametrize(
    "x, y, prior, message",
    [
        (X, Y, "gaussian", "prior must be a NormalGammaPrior"),
        (torch.ones(4), Y, PRIOR, "x must be 2-D"),
        (X, torch.zeros(4, 1), PRIOR, r"y must have shape \(n,\)"),
        (X, torch.zeros(3), PRIOR, "x has 4 rows, y has 3"),
        (torch.ones(4, 3), Y, PRIOR, r"x has 3 columns but the prior has 2 weights"),
        (X, torch.tensor([0.0, math.inf, 0.0, 0.0]), PRIOR, "targets y contains infinite values"),
    ],
)
@pytest.mark.parametrize("function", [fit_cavi, exact_posterior])
def test_bad_data(function, x, y, prior, message):
    with pytest.raises(ValueError, match=message):
        function(x, y, prior)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(max_iterations=0), "max_iterations must be a positive integer"),
        (dict(tolerance=-1.0), "tolerance must be a positive number"),
        (dict(init_tau_mean=0.0), "init_tau_mean must be a positive number"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        fit_cavi(X, Y, PRIOR, **options)
