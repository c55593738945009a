r"""Tempered posteriors: the likelihood raised to the power :math:`1/T`.

.. math::

    p_T(W \mid \mathcal{D}) \;\propto\; p(\mathcal{D} \mid W)^{1/T}\, p(W)

:math:`T = 1` is Bayes' posterior, the default everywhere. :math:`T < 1` is a *cold* posterior, sharper than Bayes', as
if each data point had been seen :math:`1/T` times; :math:`T > 1` a warm one, closer to the prior. Cold posteriors
predict better than Bayes' for many deep networks (Wenzel et al. 2020, "How good is the Bayes posterior in deep neural
networks really?"), the sign of a misspecified prior or likelihood; the temperature is the knob to ask that question
with, and a fit run at :math:`T \ne 1` says so in its label (``laplace (T=0.1)``) and its record's options.

This is the likelihood temperature of Wenzel et al.'s section 4 (the prior is not tempered). Where the methods take it:

- SVI: the ELBO's likelihood weight, :math:`\mathbb{E}_q\big[\tfrac{1}{T}\log p(\mathcal{D} \mid W)\big] -
  \mathrm{KL}(q \,\|\, p)`;
- NUTS, SGLD and SGHMC: the potential :math:`U_T(W) = -\tfrac{1}{T}\log p(\mathcal{D} \mid W) - \log p(W)`;
- Laplace: the Gaussian at the mode of :math:`\log p_T` with precision :math:`H/T + P`.

A temperature must lie in :data:`TEMPERATURES` (:func:`parse_temperature` checks it with the other options, before any
work): outside it one of the potential's two terms is lost to float64's rounding of the other.

The MAP network, the ensemble and MC dropout take no temperature: their networks are modes (or dropout fits), not
posteriors, and the mode of :math:`p_T` is the MAP of the untempered model with the prior's weight multiplied by
:math:`T`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import torch
from bnn.models.network import OBSERVED_SITE
from pyro.poutine.messenger import Messenger

UNTEMPERED = 1.0
"""Bayes' posterior, every method's default temperature."""

_EPSILON = torch.finfo(torch.float64).eps
TEMPERATURES = (_EPSILON, 1 / _EPSILON)
r"""The temperatures accepted, :math:`[\epsilon, 1/\epsilon]` with :math:`\epsilon = 2^{-52}`, float64's machine
epsilon. The potential :math:`-\tfrac{1}{T}\log p(\mathcal{D} \mid W) - \log p(W)` adds two terms; with each of
order one (per datum and per weight), below :math:`T = \epsilon` the likelihood's term is more than :math:`1/\epsilon`
times the prior's, which float64 then rounds away (the fit is the maximum likelihood whatever :math:`T`, and far below,
near :math:`T = 10^{-300}`, the scaled log-likelihood overflows); above :math:`1/\epsilon` the likelihood's term is
rounded away (the fit is the prior)."""


def parse_temperature(option: str, value: Any) -> float:
    """``value`` as a float if it is a number in :data:`TEMPERATURES` (not a bool); else ``ValueError`` naming
    ``option`` and why the range ends where it does."""
    low, high = TEMPERATURES
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and low <= value <= high):
        raise ValueError(f"{option} must be a positive number in [{low:.3g}, {high:.3g}], got {value!r}: outside it one "
                         "of the two terms of the tempered potential -log p(D | W) / T - log p(W) is below the other's "
                         "float64 rounding: at a smaller T the prior's is lost (the fit is maximum likelihood whatever "
                         "T, and near T = 1e-300 the scaled log-likelihood overflows), at a larger T the likelihood's "
                         "(the fit is the prior); give T = 1 for Bayes' posterior, or below 1 (0.1) for a cold one")
    return float(value)


def tempered_label(label: str, value: float) -> str:
    """``label`` as reports name a fit at temperature ``value``: unchanged at :data:`UNTEMPERED`, else with
    ``(T=value)`` appended."""
    return label if value == UNTEMPERED else f"{label} (T={value:g})"


class TemperedLikelihood(Messenger):
    r"""Multiplies the log-density of the model's likelihood site (``obs``) by :math:`1/T`.

    Applied to a model's program, it turns every quantity Pyro computes from the trace (the ELBO, the potential of
    Pyro's NUTS) into that of :math:`p_T`; the priors, the guide and every other site keep their scale.

    Parameters
    ----------
    temperature : float
        :math:`T > 0`.
    """

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = temperature

    def _pyro_sample(self, msg) -> None:
        if msg["name"] == OBSERVED_SITE and msg["is_observed"]:
            msg["scale"] = msg["scale"] / self.temperature


def tempered(program: Callable, value: float) -> Callable:
    """``program`` run under :class:`TemperedLikelihood` (``program`` itself at :data:`UNTEMPERED`), same arguments."""
    if value == UNTEMPERED:
        return program

    def tempered_program(*args, **kwargs):
        with TemperedLikelihood(value):
            return program(*args, **kwargs)

    return tempered_program
