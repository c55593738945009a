"""Predictive summaries (:mod:`bnn.inference.core.prediction`): the entropy of a classifier's predictive split into
its aleatoric and epistemic parts, checked against hand-computed cases."""

from __future__ import annotations

import math

import torch
from bnn.inference.core.prediction import categorical_entropy, entropy_split, summarise
from pyro import distributions as dist


def test_the_entropy_of_a_uniform_and_of_a_certain_prediction():
    torch.testing.assert_close(categorical_entropy(torch.full((4,), 0.25)), torch.tensor(math.log(4)))
    assert float(categorical_entropy(torch.tensor([1.0, 0.0, 0.0]))) == 0.0  # 0 log 0 = 0, no NaN


def test_draws_that_disagree_are_epistemic_and_draws_that_agree_are_aleatoric():
    disagree = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])  # two sure draws on opposite labels
    total, expected, information = entropy_split(disagree)
    torch.testing.assert_close((total, expected, information),
                               (torch.tensor([math.log(2)]), torch.tensor([0.0]), torch.tensor([math.log(2)])))
    agree = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]])  # two draws both unsure
    total, expected, information = entropy_split(agree)
    torch.testing.assert_close((total, expected, information),
                               (torch.tensor([math.log(2)]), torch.tensor([math.log(2)]), torch.tensor([0.0])))


def test_a_binary_prediction_splits_its_entropy_over_its_draws():
    p = torch.tensor([[0.9, 0.5], [0.7, 0.5]])  # 2 draws at 2 inputs: probability of class 1
    prediction = summarise("binary", dist.Bernoulli(probs=p), torch.zeros(2, 2, 1))
    h = lambda q: -(q * math.log(q) + (1 - q) * math.log(1 - q))  # noqa: E731
    torch.testing.assert_close(prediction.entropy, torch.tensor([h(0.8), h(0.5)]))
    torch.testing.assert_close(prediction.expected_entropy, torch.tensor([(h(0.9) + h(0.7)) / 2, h(0.5)]))
    torch.testing.assert_close(prediction.mutual_information, prediction.entropy - prediction.expected_entropy)
    assert float(prediction.mutual_information[1]) == 0.0


def test_a_multiclass_prediction_and_a_regression():
    probs = torch.softmax(torch.randn(5, 3, 4, generator=torch.Generator().manual_seed(0)), -1)
    prediction = summarise("multiclass", dist.Categorical(probs=probs), torch.zeros(5, 3, 4))
    expected = entropy_split(probs)
    torch.testing.assert_close((prediction.entropy, prediction.expected_entropy, prediction.mutual_information), expected)
    assert bool((prediction.mutual_information >= 0).all())
    regression = summarise("regression", dist.Normal(torch.zeros(5, 3), 1.0), torch.zeros(5, 3, 1))
    assert regression.entropy is None and regression.mutual_information is None
