r"""How far an approximate posterior's predictive lies from a reference's: :func:`fidelity`.

Test log-likelihood and calibration reward a good predictive, not a faithful posterior. Following the NeurIPS 2021
approximate-inference competition (Izmailov et al. 2021, "What are Bayesian neural network posteriors really
like?"), each approximation's predictive at inputs :math:`x_1, \dots, x_n` is compared with a trusted reference's
(a converged NUTS run), input by input, and the distances averaged over the inputs.

**Classifiers.** With :math:`p_i` and :math:`q_i` the reference's and the approximation's predictive class
probabilities at :math:`x_i` (the means of the draws' probabilities),

.. math::

    \text{agreement} = \frac1n \sum_i \mathbb{1}\big[\arg\max_k p_{ik} = \arg\max_k q_{ik}\big], \qquad
    \text{TV} = \frac1n \sum_i \tfrac12 \sum_k \lvert p_{ik} - q_{ik} \rvert .

A linearised predictive (Laplace's) gives :math:`q_i` in closed form, by its link approximation (the probit
approximation or the Laplace bridge), not as a mean over draws: its :math:`q_i` are those probabilities, the same at
every draw, so they add no Monte Carlo error.

**Regression.** With :math:`F_i` and :math:`G_i` the two predictive distributions of :math:`y` at :math:`x_i` (the
draws of :math:`y^*`, observation noise included), the 2-Wasserstein distance of the two, by their quantile
functions, and the ratio of their standard deviations,

.. math::

    W_2 = \frac1n \sum_i \Big(\int_0^1 \big(F_i^{-1}(u) - G_i^{-1}(u)\big)^2\, du\Big)^{1/2}, \qquad
    \text{std ratio} = \frac1n \sum_i \frac{\operatorname{sd}(G_i)}{\operatorname{sd}(F_i)},

the integral taken at :math:`M` midpoints :math:`u_j = (j + \frac12)/M` of the empirical quantile functions, :math:`M`
the larger of the two draw counts. Two Gaussians :math:`\mathcal{N}(m_1, s_1^2)`, :math:`\mathcal{N}(m_2, s_2^2)`
have :math:`W_2 = \sqrt{(m_1 - m_2)^2 + (s_1 - s_2)^2}`.

**Monte Carlo error.** Each average is computed from finite draws of both posteriors. Its standard error is the
delete-a-group jackknife over :data:`BLOCKS` contiguous blocks of weight draws of each posterior at once (contiguous,
so that a chain's autocorrelation stays inside a block): with :math:`\hat\theta_{(b)}` the statistic without block
:math:`b` of either, :math:`\mathrm{SE} = \big(\frac{B - 1}{B} \sum_b (\hat\theta_{(b)} - \bar\theta)^2\big)^{1/2}`.

**The reference's own check.** A reference is trusted only where its draws of :math:`f(x)` at the same inputs pass
the checks of a converged sampler: rank-normalised split :math:`\hat R \le` :data:`MAX_R_HAT`, bulk ESS
:math:`\ge` :data:`MIN_ESS` for every output at every input (:mod:`bnn.inference.diagnostics.rank_diagnostics`), and
no divergent transition (a sampler's record that counts them); otherwise :func:`fidelity` refuses it and says which
check failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.prediction import Prediction, PredictiveType
from bnn.inference.diagnostics.rank_diagnostics import ess_bulk, split_r_hat

BLOCKS = 10
"""The jackknife's groups of weight draws (module notes)."""
MAX_R_HAT, MIN_ESS = 1.01, 400
"""The reference's own check on :math:`f(x)`: the largest split :math:`\\hat R` and the smallest bulk ESS."""
CLASSIFIER_COLUMNS = ["agreement", "agreement_se", "total_variation", "total_variation_se"]
REGRESSION_COLUMNS = ["wasserstein", "wasserstein_se", "std_ratio", "std_ratio_se"]


def reference_problems(reference: Posterior, f: torch.Tensor) -> list[str]:
    """What keeps ``reference`` from being a reference at the inputs where ``f`` ``(S, n, K)`` are its draws of the
    network's outputs, chain after chain (``reference.predict(x).f``; module notes); empty when it passes."""
    f = f.reshape(reference.num_chains, reference.num_draws, -1).to(torch.float64).numpy()
    problems = []
    chains = f"{reference.num_chains} chain(s) of {reference.num_draws} draws"
    r_hat, ess = split_r_hat(f), ess_bulk(f)
    if np.isnan(r_hat).any():
        problems.append(f"the split R-hat of f(x) cannot be computed from {chains} (it needs two chains or more)")
    elif r_hat.max() > MAX_R_HAT:
        problems.append(f"the split R-hat of f(x) reaches {r_hat.max():.4g}, above {MAX_R_HAT}")
    if np.isnan(ess).any():
        problems.append(f"the bulk ESS of f(x) cannot be computed from {chains}")
    elif ess.min() < MIN_ESS:
        problems.append(f"the bulk ESS of f(x) falls to {ess.min():.0f}, below {MIN_ESS}")
    divergences = getattr(getattr(reference.record, "diagnostics", None), "divergences", 0)
    if divergences:
        problems.append(f"{divergences} divergent transitions")
    return problems


def fidelity(reference: Posterior, posteriors: Mapping[str, Posterior], x: torch.Tensor, *, seed: int = 0
             ) -> pd.DataFrame:
    """Each posterior's predictive against ``reference``'s at the inputs ``x`` (module notes).

    Parameters
    ----------
    reference : Posterior
        The trusted posterior; it must pass its own check at ``x``.
    posteriors : mapping of str to Posterior
        The approximations, by name (the table's rows), fitted to the same model and data.
    x : torch.Tensor
        The inputs ``(n, in_features)`` the predictives are compared at (a test split).
    seed : int
        Seeds each predictive's draws (of :math:`y^*`, and of a linearised predictive's outputs).

    Returns
    -------
    pandas.DataFrame
        A row per posterior: for classifiers ``agreement``, ``total_variation``, for regression ``wasserstein`` and
        ``std_ratio``, each with its ``_se``.

    Raises
    ------
    ValueError
        For a reference that fails its own check (which check, and the number found), or a posterior of another task.
    """
    task = reference.model.likelihood.task
    for name, posterior in posteriors.items():
        if posterior.model.likelihood.task != task:
            raise ValueError(f"posterior {name!r} predicts a {posterior.model.likelihood.task} target and the "
                             f"reference a {task} one: compare posteriors of the same model")
    reference_prediction = reference.predict(x, seed=seed)
    problems = reference_problems(reference, reference_prediction.f)
    if problems:
        raise ValueError(f"the {reference.method} posterior is refused as a reference: {'; '.join(problems)}; run "
                         "more chains or longer ones (num_warmup, num_samples), or a higher target_accept")
    draws, measure, columns = ((_outcome_draws, _regression_distances, REGRESSION_COLUMNS) if task == "regression"
                               else (_class_probabilities, _classifier_distances, CLASSIFIER_COLUMNS))
    reference_draws = draws(reference, reference_prediction)
    rows = {name: measure(reference_draws, draws(posterior, posterior.predict(x, seed=seed)))
            for name, posterior in posteriors.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def _class_probabilities(posterior: Posterior, prediction: Prediction) -> torch.Tensor:
    """The class probabilities of each weight draw of ``prediction``, ``(S, n, K)`` (a binary classifier's two
    classes); for a linearised predictive, its own probabilities at every draw (module notes)."""
    binary = posterior.model.likelihood.task == "binary"
    if posterior.default_predictive is PredictiveType.LINEARIZED:
        probs = torch.stack([1 - prediction.probs, prediction.probs], -1) if binary else prediction.probs
        return probs.to(torch.float64).expand(prediction.f.shape[0], *probs.shape)
    observation = posterior.model.likelihood.distribution(prediction.f, {})
    if binary:
        return torch.stack([1 - observation.mean, observation.mean], -1).to(torch.float64)
    return observation.probs.to(torch.float64)


def _outcome_draws(posterior: Posterior, prediction: Prediction) -> torch.Tensor:
    """``prediction``'s draws of :math:`y^*` grouped by weight draw, ``(S, R, n')``: ``R`` draws for each of the ``S``
    weight draws, ``n'`` the inputs times the outputs."""
    weights = prediction.f.shape[0]
    draws = prediction.draws.reshape(-1, weights, *prediction.draws.shape[1:])  # (R, S, n, ...): R per weight draw
    return draws.transpose(0, 1).reshape(weights, draws.shape[0], -1).to(torch.float64)


def _jackknife(statistic: Callable[[torch.Tensor, torch.Tensor], float], reference: torch.Tensor,
               approximation: torch.Tensor) -> tuple[float, float]:
    """``statistic`` of all draws and its delete-a-group jackknife standard error (module notes); the draws lead."""
    whole = statistic(reference, approximation)
    groups = min(BLOCKS, reference.shape[0], approximation.shape[0])
    if groups < 2:
        return whole, float("nan")
    ref_blocks, approx_blocks = _block_of(reference.shape[0], groups), _block_of(approximation.shape[0], groups)
    left_out = np.array([statistic(reference[ref_blocks != b], approximation[approx_blocks != b]) for b in range(groups)])
    return whole, float(np.sqrt((groups - 1) / groups * ((left_out - left_out.mean()) ** 2).sum()))


def _block_of(draws: int, groups: int) -> torch.Tensor:
    """The group of each of ``draws`` draws: ``groups`` contiguous runs of (nearly) equal length."""
    return torch.arange(draws) * groups // draws


def _classifier_distances(reference: torch.Tensor, approximation: torch.Tensor) -> list[float]:
    def agreement(p: torch.Tensor, q: torch.Tensor) -> float:
        return float((p.mean(0).argmax(-1) == q.mean(0).argmax(-1)).double().mean())

    def total_variation(p: torch.Tensor, q: torch.Tensor) -> float:
        return float(0.5 * (p.mean(0) - q.mean(0)).abs().sum(-1).mean())

    return [*_jackknife(agreement, reference, approximation), *_jackknife(total_variation, reference, approximation)]


def _regression_distances(reference: torch.Tensor, approximation: torch.Tensor) -> list[float]:
    def wasserstein(p: torch.Tensor, q: torch.Tensor) -> float:
        return float(wasserstein_2(p.flatten(0, 1), q.flatten(0, 1)).mean())

    def std_ratio(p: torch.Tensor, q: torch.Tensor) -> float:
        return float((q.flatten(0, 1).std(0) / p.flatten(0, 1).std(0)).mean())

    return [*_jackknife(wasserstein, reference, approximation), *_jackknife(std_ratio, reference, approximation)]


def wasserstein_2(draws_a: torch.Tensor, draws_b: torch.Tensor) -> torch.Tensor:
    r"""The 2-Wasserstein distance between the empirical distributions of ``draws_a`` ``(A, n)`` and ``draws_b``
    ``(B, n)``, column by column, ``(n,)``: their quantile functions compared at :math:`M = \max(A, B)` midpoints
    (module notes)."""
    count = max(len(draws_a), len(draws_b))
    levels = (torch.arange(count, dtype=torch.float64) + 0.5) / count
    quantiles_a = torch.quantile(draws_a.to(torch.float64), levels, dim=0)
    quantiles_b = torch.quantile(draws_b.to(torch.float64), levels, dim=0)
    return ((quantiles_a - quantiles_b) ** 2).mean(0).sqrt()
