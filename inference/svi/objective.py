r"""The objective SVI minimises: an ELBO estimator and the (model, guide) pair it scores.

.. math::

    -\mathcal{L}(\phi) = -\mathbb{E}_{q_\phi(W)}\Big[\frac{N}{T|B|}\sum_{i \in B} \log p(y_i \mid x_i, W)\Big]
    + c_t\,\mathrm{KL}\big(q_\phi(W) \,\|\, p(W)\big)

estimated with ``num_particles`` reparameterised draws (vectorised), with the KL scale
:math:`c_t = M\pi_t` of :mod:`bnn.inference.svi.kl_weights` (:math:`c_t = 1` for uniform weights) and the
likelihood temperature :math:`T` (1 by default, :mod:`bnn.inference.core.temperature`).
"""

from __future__ import annotations

from collections.abc import Callable

from bnn.inference.core.temperature import UNTEMPERED, tempered
from bnn.inference.svi.kl_weights import KLWeighting, kl_scaled
from bnn.models.network import MAX_PLATE_NESTING
from pyro.infer import ELBO, JitTrace_ELBO, Trace_ELBO


def elbo_loss(num_particles: int, jit: bool) -> ELBO:
    """``Trace_ELBO``, or ``JitTrace_ELBO`` with ``jit``, over ``num_particles`` draws vectorised in a plate left of
    the model's plates.

    The JIT loss compiles on its first call (and again for new keyword arguments): make its calls inside
    :func:`~bnn.runtime.jit_deprecation.torch_jit_deprecation_ignored`, since torch warns of TorchScript's
    deprecation at each compilation and the user can do nothing about it. The loop enters that once for all its
    steps, not at every call, where it cost a few per cent of a small network's step.
    """
    elbo_class = JitTrace_ELBO if jit else Trace_ELBO
    return elbo_class(
        num_particles=num_particles,
        vectorize_particles=num_particles > 1,
        max_plate_nesting=MAX_PLATE_NESTING,
        **({"ignore_jit_warnings": True} if jit else {}),
    )


def svi_pair(model, guide, weighting: KLWeighting, temperature: float = UNTEMPERED) -> tuple[Callable, Callable]:
    r"""The model and guide whose ELBO SVI optimises.

    A guide may offer ``elbo_pair()``, the pair to optimise in place of ``(model, guide)`` (the
    mean-field guides skip prior terms they cancel analytically, local reparameterisation rewrites
    the likelihood). With a non-uniform ``weighting`` both take the KL scale :math:`c_t` as a third
    positional argument (:func:`~bnn.inference.svi.kl_weights.kl_scaled`). At a ``temperature`` :math:`T \ne 1` the
    model's log-likelihood is weighed by :math:`1/T` (:func:`~bnn.inference.core.temperature.tempered`).

    Returns
    -------
    tuple of callable
        ``(svi_model, svi_guide)``.
    """
    elbo_pair = getattr(guide, "elbo_pair", None)
    svi_model, svi_guide = (model, guide) if elbo_pair is None else elbo_pair()
    svi_model = tempered(svi_model, temperature)
    if weighting is not KLWeighting.UNIFORM:
        svi_model, svi_guide = kl_scaled(svi_model), kl_scaled(svi_guide)
    return svi_model, svi_guide
