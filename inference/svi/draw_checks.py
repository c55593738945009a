r"""Checks on draws of a fitted guide: finite, and a likelihood can be built on them.

The loss of every step is checked before its update
(:func:`~bnn.inference.svi.nonfinite.guarded_step`), but the update itself can throw the
parameters where draws of the guide are not usable: a noise scale
:math:`\sigma = \operatorname{softplus}(\rho)` underflows to 0 for :math:`\rho \ll 0` (the
likelihood :math:`\mathcal{N}(y; f, \sigma^2)` refuses it) or a weight overflows to infinity.
"""

from __future__ import annotations

import pyro
import torch
from bnn.inference.svi.nonfinite import HINT


def likelihood_refusal(model, x: torch.Tensor, samples: dict[str, torch.Tensor]) -> str | None:
    """Why the likelihood cannot be built on the draws ``samples``.

    Parameters
    ----------
    model : BayesianNetwork
        The model whose observation distribution is built, on the first example of ``x``.
    x : torch.Tensor
        The inputs.
    samples : dict of str to torch.Tensor
        Draws shaped ``(1, draws, *site_shape)``.

    Returns
    -------
    str or None
        The first line of Pyro's validation error (for example a noise scale drawn at 0), or
        ``None`` when the likelihood can be built.
    """
    try:
        with pyro.validation_enabled(True):
            model.observation_distribution(x[:1], {name: value[0] for name, value in samples.items()})
    except ValueError as error:
        return str(error).splitlines()[0].rstrip(":")
    return None


def non_finite_sites(samples: dict[str, torch.Tensor]) -> list[str]:
    """The sites of ``samples`` with a draw that is not finite."""
    return [name for name, value in samples.items() if not bool(torch.isfinite(value).all())]


def unusable(model, x: torch.Tensor, samples: dict[str, torch.Tensor]) -> bool:
    """Whether any of the draws ``samples`` (as :func:`likelihood_refusal`'s) is not finite or the likelihood cannot be
    built on them."""
    return bool(non_finite_sites(samples)) or likelihood_refusal(model, x, samples) is not None


def check_draws(model, x: torch.Tensor, samples: dict[str, torch.Tensor], steps_done: int, lr: float) -> None:
    """Refuse draws of the fitted guide that are not finite or on which the likelihood cannot be built.

    Only the last step can have thrown the parameters there: every earlier step's update was
    checked by the loss of the step after it.

    Parameters
    ----------
    model, x, samples
        As :func:`likelihood_refusal`.
    steps_done : int
        The steps the fit took, named in the message.
    lr : float
        The fit's rate, named in the hint.

    Raises
    ------
    ValueError
        Naming the sites whose draws are not finite and the likelihood's refusal.
    """
    non_finite = non_finite_sites(samples)
    refusal = likelihood_refusal(model, x, samples)
    if non_finite or refusal:
        raise ValueError(f"after step {steps_done} the guide's draws of {non_finite} are not finite"
                         f"{'' if refusal is None else f' and the likelihood refuses them ({refusal})'} (the last step "
                         f"overflowed its parameters): {HINT.format(lr=lr)}")
