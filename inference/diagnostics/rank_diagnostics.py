r"""ArviZ's rank-normalised split :math:`\hat{R}` and its bulk and tail effective sample sizes, for many quantities at once.

ArviZ (``az.rhat``, ``az.ess(method="bulk" | "tail")``) computes these one scalar quantity at a time in a Python loop: on
the 3,760 weights of a network, or its outputs at 500 inputs, the loop costs more than the sampler's own steps. Here the
same arithmetic runs on every quantity at once, array operations over a trailing axis, to ArviZ's numbers up to
rounding (its test: ``tests/inference/diagnostics/test_rank_diagnostics.py``). Vehtari et al. (2021, "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2)):

* each chain is split in halves (:math:`M` = twice the chains, :math:`N` draws each: the first and last
  :math:`\lfloor D/2 \rfloor` of :math:`D`), the draws of a quantity ranked together (average ranks of ties,
  :math:`r`) and mapped to normal scores :math:`z = \Phi^{-1}\big((r - 3/8) / (MN + 1/4)\big)`;
* :math:`\hat{R} = \sqrt{(B/W + N - 1)/N}` with :math:`B` :math:`N` times the variance of the split chains' means and
  :math:`W` the mean of their variances, of the scores (bulk) and of the scores of :math:`|x - \mathrm{median}(x)|`
  (tail), the larger of the two;
* the ESS :math:`MN/\hat\tau` with :math:`\hat\tau = -1 + 2\sum_t \hat\rho_t`, the autocorrelations
  :math:`\hat\rho_t = 1 - (W - \bar\gamma_t)/\widehat{\mathrm{var}}^+` from the chains' mean autocovariance
  :math:`\bar\gamma_t`, summed in pairs up to the first pair whose sum is not positive (Geyer's initial positive
  sequence), the pair sums made non-increasing (his initial monotone sequence), :math:`\hat\tau` at least
  :math:`1/\log_{10}(MN)`; bulk: of the scores; tail: the smaller of the ESS of the indicators
  :math:`x \le q_{0.05}` and :math:`x \le q_{0.95}` (quantiles of all draws, R's type 7). Draws that do not vary
  have an ESS of their count.

A quantity with a NaN draw gets NaN, as in ArviZ; fewer than four draws give NaN, and :math:`\hat{R}` NaN for one
chain.
"""

from __future__ import annotations

import numpy as np

MIN_DRAWS = 4
BLOM = 3 / 8
"""Blom's offset of the normal scores of ranks."""
TAIL_PROBABILITIES = (0.05, 0.95)


def split_r_hat(draws: np.ndarray) -> np.ndarray:
    r"""Rank-normalised split :math:`\hat{R}` of each quantity of ``draws`` ``(chains, draws, K)``: ``(K,)``, the larger
    of its bulk and tail parts (:func:`split_r_hat_parts`)."""
    return np.maximum(*split_r_hat_parts(draws))


def split_r_hat_parts(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The bulk and the tail :math:`\hat{R}` of each quantity of ``draws`` ``(chains, draws, K)``, ``(K,)`` each
    (ArviZ's ``az.rhat`` methods ``"z_scale"`` and ``"folded"``): of the draws' normal scores, which compares where
    the split chains lie, and of the scores of their distances from the median, which compares how far they spread."""
    values, valid = _quantities(draws)
    if values.shape[1] < 2 or values.shape[2] < MIN_DRAWS:
        return np.full(values.shape[0], np.nan), np.full(values.shape[0], np.nan)
    split = _split(values)
    folded = np.abs(split - np.median(split.reshape(split.shape[0], -1), axis=1)[:, None, None])
    return (np.where(valid, _r_hat(_normal_scores(split)), np.nan),
            np.where(valid, _r_hat(_normal_scores(folded)), np.nan))


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size of each quantity of ``draws`` ``(chains, draws, K)``: ``(K,)``."""
    values, valid = _quantities(draws)
    if values.shape[2] < MIN_DRAWS:
        return np.full(values.shape[0], np.nan)
    return np.where(valid, _ess(_normal_scores(_split(values))), np.nan)


def ess_tail(draws: np.ndarray) -> np.ndarray:
    """Tail effective sample size of each quantity of ``draws`` ``(chains, draws, K)``: ``(K,)``."""
    values, valid = _quantities(draws)
    if values.shape[2] < MIN_DRAWS:
        return np.full(values.shape[0], np.nan)
    flat = values.reshape(values.shape[0], -1)
    ess = [_ess(_split((values <= np.quantile(flat, p, axis=1)[:, None, None]).astype(float)))
           for p in TAIL_PROBABILITIES]
    return np.where(valid, np.minimum(*ess), np.nan)


def _quantities(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` ``(chains, draws, K)`` as float64 ``(K, chains, draws)`` with NaN set to 0, and which quantities had no
    NaN."""
    values = np.moveaxis(np.asarray(draws, dtype=np.float64), -1, 0)
    valid = ~np.isnan(values).any(axis=(1, 2))
    return np.where(valid[:, None, None], values, 0.0), valid


def _split(values: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as chains of their own: ``(K, 2 chains, draws // 2)``."""
    half = values.shape[2] // 2
    return np.concatenate([values[:, :, :half], values[:, :, values.shape[2] - half:]], axis=1)


def _normal_scores(values: np.ndarray) -> np.ndarray:
    """The normal scores of the ranks of each quantity's draws among all of its draws (module notes)."""
    from scipy import special, stats  # here, not with the package: scipy.stats takes a second to import, in every worker

    flat = values.reshape(values.shape[0], -1)
    ranks = stats.rankdata(flat, method="average", axis=1)
    return special.ndtri((ranks - BLOM) / (flat.shape[1] - 2 * BLOM + 1)).reshape(values.shape)  # as norm.ppf


def _r_hat(values: np.ndarray) -> np.ndarray:
    r""":math:`\sqrt{(B/W + N - 1)/N}` of each quantity of ``values`` ``(K, chains, N)``."""
    n = values.shape[2]
    between = n * np.var(values.mean(axis=2), axis=1, ddof=1)
    within = np.var(values, axis=2, ddof=1).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(values: np.ndarray) -> np.ndarray:
    """The effective sample size of each quantity of ``values`` ``(K, chains, N)`` (module notes)."""
    from scipy.fft import next_fast_len  # here, not with the package, as scipy.stats above

    k, chains, n = values.shape
    centred = values - values.mean(axis=2, keepdims=True)
    size = next_fast_len(2 * n)
    transform = np.fft.rfft(centred, n=size, axis=2)
    autocovariance = np.fft.irfft(transform * np.conjugate(transform), n=size, axis=2)[:, :, :n] / n
    mean_autocovariance = autocovariance.mean(axis=1)  # (K, N)
    mean_var = mean_autocovariance[:, 0] * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus = var_plus + np.var(values.mean(axis=2), axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (mean_var[:, None] - mean_autocovariance) / var_plus[:, None]
    rho[:, 0] = 1.0
    # pair q holds lags 2q and 2q + 1; Geyer's loop takes pair q >= 1 while every earlier pair's sum is positive and
    # 2q - 1 < N - 3, the last pair it took being the first whose sum is not positive
    pairs = (n - 2) // 2 + 1  # pairs 0 .. pairs - 1 exist (lag 2q + 1 <= N - 1 wherever the loop may reach them)
    sums = rho[:, 0:2 * pairs:2] + rho[:, 1:2 * pairs:2]
    reachable = np.arange(pairs) >= 1
    reachable &= 2 * np.arange(pairs) - 1 < n - 3
    not_positive = sums <= 0.0
    first_stop = np.where(not_positive.any(axis=1), not_positive.argmax(axis=1), pairs)
    taken = np.minimum(first_stop, reachable.sum())  # P: the pairs the loop took
    kept = np.arange(pairs)[None, :] < taken[:, None]  # pairs 0 .. P - 1 enter the sum whole
    monotone = np.minimum.accumulate(np.where(kept, sums, np.inf), axis=1)
    body = np.where(kept, monotone, 0.0).sum(axis=1)
    last_even = rho[np.arange(k), np.minimum(2 * taken, n - 1)]
    last_sum = sums[np.arange(k), np.minimum(taken, pairs - 1)]
    extra = np.where((taken > 0) & ((last_sum >= 0.0) | (last_even > 0.0)), last_even, np.where(taken > 0, 0.0, 1.0))
    tau = np.maximum(-1.0 + 2.0 * body + extra, 1.0 / np.log10(chains * n))
    ess = chains * n / tau
    constant = values.max(axis=(1, 2)) - values.min(axis=(1, 2)) < np.finfo(float).resolution
    ess = np.where(np.isnan(rho).any(axis=1), np.nan, ess)
    return np.where(constant, float(chains * n), ess)
