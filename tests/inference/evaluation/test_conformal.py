"""Split conformal prediction (:mod:`bnn.inference.evaluation.conformal`): the coverage guarantee on fresh
exchangeable data, against its exact value, whatever the posterior got wrong."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
from bnn.inference import fit
from bnn.inference.evaluation import conformalize
from bnn.inference.evaluation.conformal import adaptive_set_scores, calibration_rank, uniform_draws
from bnn.models import BayesianMLP

NOISE = 0.3
REPEATS, CALIBRATION, TEST = 100, 100, 100


def regression_data(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(n, 1, generator=generator) * 4 - 2
    return x, torch.sin(2 * x[:, 0]) + NOISE * torch.randn(n, generator=generator)


def classification_data(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 2, generator=generator)
    logits = 4 * torch.stack([x[:, 0], x[:, 1], -x.sum(-1)], dim=-1)
    return x, torch.distributions.Categorical(logits=logits).sample().double()


@pytest.fixture(scope="module")
def overconfident_regression():
    """A MAP network told the noise is 0.05 where it is 0.3: its own 90% interval covers far less than 90%."""
    torch.manual_seed(0)
    model = BayesianMLP(1, 1, hidden=(16,), likelihood={"name": "gaussian", "scale": 0.05})
    return fit(model, regression_data(torch.Generator().manual_seed(1), 200), "map", map_steps=500, progress=False)


@pytest.fixture(scope="module")
def classifier():
    model = BayesianMLP(2, 3, hidden=(8,), likelihood="categorical")
    return fit(model, classification_data(torch.Generator().manual_seed(1), 300), "map", map_steps=500, progress=False)


def test_the_rank_of_the_threshold_and_the_calibration_points_it_needs():
    assert calibration_rank(100, 0.1) == 91 and calibration_rank(9, 0.1) == 9 and calibration_rank(19, 0.05) == 19
    with pytest.raises(ValueError, match=r"coverage 1 - alpha = 0.9 needs at least 9 calibration points, got 8"):
        calibration_rank(8, 0.1)
    for alpha in (0, 1, -0.1, 1.5, "0.1", None, True, float("nan")):
        with pytest.raises(ValueError, match=rf"alpha must be a number in \(0, 1\) \(the miscoverage: 0.1 for 90% "
                                             rf"coverage\), got {re.escape(repr(alpha))}"):
            calibration_rank(100, alpha)


def test_adaptive_set_scores_are_the_mass_ranked_above_each_label_and_a_uniform_share_of_its_own():
    probs = torch.tensor([[0.5, 0.2, 0.3], [0.1, 0.1, 0.8]])
    torch.testing.assert_close(adaptive_set_scores(probs, torch.tensor([1.0, 0.5])),
                               torch.tensor([[0.5, 1.0, 0.8], [0.85, 0.95, 0.4]]))  # ties ranked by label


def exact_coverage() -> tuple[float, float]:
    """Split conformal's mean coverage with continuous scores, :math:`k/(n+1)`, and the standard error of the mean
    of REPEATS coverages on TEST points each (given the calibration set the coverage is Beta(k, n + 1 - k); the test
    points add binomial noise)."""
    rank = calibration_rank(CALIBRATION, 0.1)
    exact = rank / (CALIBRATION + 1)
    beta_variance = rank * (CALIBRATION + 1 - rank) / ((CALIBRATION + 1) ** 2 * (CALIBRATION + 2))
    return exact, math.sqrt((beta_variance + exact * (1 - exact) / TEST) / REPEATS)


def test_regression_intervals_cover_exactly_k_over_n_plus_one_on_fresh_data(overconfident_regression):
    generator = torch.Generator().manual_seed(2)
    conformal, bayesian = [], []
    for _ in range(REPEATS):
        predictor = conformalize(overconfident_regression, *regression_data(generator, CALIBRATION), alpha=0.1)
        x, y = regression_data(generator, TEST)
        conformal.append(predictor.covers(x, y).double().mean())
        low, high = overconfident_regression.predict(x).interval(0.9)
        bayesian.append(((y >= low) & (y <= high)).double().mean())
    exact, standard_error = exact_coverage()
    assert abs(float(torch.stack(conformal).mean()) - exact) < 4 * standard_error
    assert float(torch.stack(bayesian).mean()) < 0.5  # the posterior's own interval: the guarantee is conformal's


def test_adaptive_sets_cover_exactly_k_over_n_plus_one_and_are_informative(classifier):
    generator = torch.Generator().manual_seed(2)
    coverage, sizes = [], []
    for repeat in range(REPEATS):  # a seed per repeat: the mean is over the uniform draws too
        predictor = conformalize(classifier, *classification_data(generator, CALIBRATION), alpha=0.1, seed=repeat)
        x, y = classification_data(generator, TEST)
        coverage.append(predictor.covers(x, y).double().mean())
        sizes.append(predictor.sets(x).double().sum(-1).mean())
    exact, standard_error = exact_coverage()
    assert abs(float(torch.stack(coverage).mean()) - exact) < 4 * standard_error
    assert float(torch.stack(sizes).mean()) < 1.5  # informative sets, far from all 3 labels


def test_a_set_is_the_most_probable_labels_until_the_mass_passes_the_threshold_and_the_seed_fixes_it(classifier):
    predictor = conformalize(classifier, *classification_data(torch.Generator().manual_seed(3), 50), alpha=0.2)
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(4))
    probs, sets = classifier.predict(x).probs, predictor.sets(x)
    scores = adaptive_set_scores(probs, uniform_draws(predictor.seed, 1, 40))
    assert torch.equal(sets, scores <= predictor.threshold)
    ranked = sets.gather(-1, torch.sort(probs, dim=-1, descending=True, stable=True).indices)
    assert torch.equal(ranked, ranked.cummin(-1).values)  # a prefix of the labels by probability
    assert torch.equal(predictor.sets(x), sets) and predictor.seed == classifier.record.seed
    assert conformalize(classifier, *classification_data(torch.Generator().manual_seed(3), 50), seed=7).seed == 7


def test_bad_calibration_data_and_the_wrong_question_are_refused(overconfident_regression, classifier):
    x, y = regression_data(torch.Generator().manual_seed(5), 20)
    with pytest.raises(ValueError, match="the model reads 1 input features but x has 2"):
        conformalize(overconfident_regression, torch.cat([x, x], 1), y)
    with pytest.raises(ValueError, match="NaN"):
        conformalize(overconfident_regression, x, torch.full_like(y, float("nan")))
    with pytest.raises(ValueError, match="needs at least 19 calibration points, got 10"):
        conformalize(overconfident_regression, x[:10], y[:10], alpha=0.05)
    with pytest.raises(ValueError, match="interval is for regression; this posterior is a multiclass classifier"):
        conformalize(classifier, *classification_data(torch.Generator(), 20)).interval(x)
    with pytest.raises(ValueError, match="sets is for classification"):
        conformalize(overconfident_regression, x, y).sets(x)
    with pytest.raises(ValueError, match="label"):
        conformalize(classifier, torch.randn(20, 2), torch.full((20,), 7.0))
    with pytest.raises(ValueError, match="seed must be a non-negative integer below 2"):
        conformalize(classifier, torch.randn(20, 2), torch.zeros(20), seed=-1)


def test_a_fit_whose_scores_are_not_finite_is_refused():
    """A noise scale of 1e-30 makes a predictive variance that underflows to 0 in float32: every score is inf, the
    threshold inf and the intervals mean +- inf x 0 = NaN."""
    x, y = regression_data(torch.Generator().manual_seed(5), 20)
    model = BayesianMLP(1, 1, hidden=(2,), likelihood={"name": "gaussian", "scale": 1e-30})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 5 steps do not converge
        posterior = fit(model, (x, y), "map", map_steps=5, map_max_iter=2, progress=False)
    with pytest.raises(ValueError, match=r"the conformity scores of 20 of the 20 calibration points are not finite "
                                         r"\(inf\): the smallest predictive standard deviation among them is 0"):
        conformalize(posterior, x, y)
