from __future__ import annotations

import pytest
import torch
from bnn.models import BernoulliLikelihood, CategoricalLikelihood, GaussianLikelihood, get_likelihood


def test_gaussian_fixed_noise_distribution():
    f = torch.randn(4, 7, 1)
    d = GaussianLikelihood(scale=0.3).distribution(f, {})
    assert d.batch_shape == (4, 7)
    torch.testing.assert_close(d.stddev, torch.full((4, 7), 0.3))


def test_gaussian_learned_noise_broadcasts_per_draw():
    likelihood = GaussianLikelihood(scale=None, noise_prior_scale=2.0)
    assert set(likelihood.latent_priors()) == {"sigma"}
    sigma = torch.tensor([0.1, 0.2, 0.3])
    d = likelihood.distribution(torch.zeros(3, 5, 1), {"sigma": sigma})
    torch.testing.assert_close(d.stddev, sigma.unsqueeze(-1).expand(3, 5))


def test_gaussian_multi_output_is_one_event_per_example():
    d = GaussianLikelihood(scale=1.0).distribution(torch.zeros(2, 5, 3), {})
    assert d.batch_shape == (2, 5) and d.event_shape == (3,)


def test_bernoulli_and_categorical_use_logits():
    f = torch.randn(2, 5, 1)
    torch.testing.assert_close(BernoulliLikelihood().distribution(f, {}).probs, torch.sigmoid(f[..., 0]))
    f = torch.randn(2, 5, 4)
    torch.testing.assert_close(CategoricalLikelihood().distribution(f, {}).probs, torch.softmax(f, -1))


@pytest.mark.parametrize(
    "likelihood, y, out, message",
    [
        (BernoulliLikelihood(), torch.tensor([0.0, 2.0]), 1, r"binary labels must be 0 or 1; found \[2.0\]"),
        (BernoulliLikelihood(), torch.tensor([[0.0], [1.0]]), 1, "must be a 1-D tensor"),
        (CategoricalLikelihood(), torch.tensor([0, 3]), 3, r"must lie in 0..2 for 3 classes"),
        (CategoricalLikelihood(), torch.tensor([0.5, 1.0]), 3, "whole numbers"),
        (CategoricalLikelihood(), torch.tensor([-1, 1]), 3, r"must lie in 0..2"),
        (GaussianLikelihood(), torch.zeros(4, 2), 1, r"must have shape \(4,\)"),
        (GaussianLikelihood(), torch.zeros(4), 2, r"must have shape \(4, 2\)"),
    ],
)
def test_targets_outside_the_support_are_refused(likelihood, y, out, message):
    with pytest.raises(ValueError, match=message):
        likelihood.check_targets(y, out)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GaussianLikelihood(scale=0.0), "scale must be a positive"),
        (lambda: GaussianLikelihood(scale=None, noise_prior_scale=-1.0), "noise_prior_scale must be a positive"),
        (lambda: BernoulliLikelihood().check_out_features(2), "needs out_features=1"),
        (lambda: CategoricalLikelihood().check_out_features(1), "needs out_features >= 2"),
        (lambda: get_likelihood("poisson"), "unknown likelihood 'poisson'"),
    ],
)
def test_bad_likelihood_options_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_categorical_targets_become_long():
    assert CategoricalLikelihood().check_targets(torch.tensor([0.0, 2.0]), 3).dtype == torch.long
