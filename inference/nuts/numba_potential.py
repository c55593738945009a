r""":math:`(\log\pi(z), \nabla_z\log\pi(z))` of the collection's MLP by the compiled kernel of
:mod:`bnn.inference.nuts.numba_kernel`, and the buffer that kernel reads.

:class:`NumbaLogDensity` reads the model once: the network's widths, its activation, each site's prior
(``gaussian`` and ``posterior`` as a Normal with a mean and a precision :math:`\tau = 1/s^2` per weight and the
constant :math:`-\sum_k \log s_k - n \log\sqrt{2\pi}`; ``laplace``; ``scale-mixture``), the likelihood (every
built-in one) and the data, into one float64 buffer whose first words, viewed as int64, are the kernel's table.
A part it does not know (a prior class of your own, a subclass of a built-in one, another network class or
transform) raises :class:`~bnn.inference.nuts.numpy_potential.Unsupported`, naming it, and
:class:`~bnn.inference.nuts.potential.FlatPotential` falls back to the next backend.

The buffer holds the kernel's work space too, so one buffer serves one evaluation at a time: one chain.
"""

from __future__ import annotations

import math

import numpy as np
from bnn.inference.nuts import numba_kernel as kernel
from bnn.inference.nuts.numpy_potential import Unsupported, dense_chain, is_exp
from bnn.models.likelihoods import (
    BernoulliLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
)
from bnn.models.posterior_prior import PosteriorPrior
from bnn.models.priors import GaussianPrior, LaplacePrior, ScaleMixturePrior


def prior_parameters(prior, site) -> tuple[int, np.ndarray]:
    """The kernel's prior code and parameters (:func:`~bnn.inference.nuts.numba_kernel.log_prior`) for ``site``."""
    size = site.numel
    if type(prior) in (GaussianPrior, PosteriorPrior):
        loc, scale = (value.double().reshape(-1).numpy() for value in prior.site_loc_scale(site))
        scale = np.broadcast_to(scale, (size,))
        constant = -float(np.log(scale).sum()) - size * kernel.HALF_LOG_TWO_PI
        return kernel.PRIOR_NORMAL, np.concatenate([[constant], np.broadcast_to(loc, (size,)), 1.0 / scale**2])
    if type(prior) is LaplacePrior:
        return kernel.PRIOR_LAPLACE, np.array([-size * math.log(2.0 * prior.scale), 1.0 / prior.scale])
    if type(prior) is ScaleMixturePrior:
        return kernel.PRIOR_SCALE_MIXTURE, np.array([
            math.log(prior.pi) - math.log(prior.sigma1) - kernel.HALF_LOG_TWO_PI,
            math.log1p(-prior.pi) - math.log(prior.sigma2) - kernel.HALF_LOG_TWO_PI,
            1.0 / prior.sigma1**2, 1.0 / prior.sigma2**2])
    raise Unsupported(f"prior {type(prior).__name__} of site {site.name!r} is not compiled")


def likelihood_parameters(likelihood, y: np.ndarray, out_features: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The kernel's likelihood code, its parameters (fixed noise, noise prior scale, minimum scale) and the
    targets as a ``(rows, columns)`` array (one-hot for the categorical)."""
    rows = y.shape[0]
    kind = type(likelihood)
    if kind is GaussianLikelihood:
        code = kernel.GAUSSIAN if likelihood.scale is not None else kernel.GAUSSIAN_LEARNED_NOISE
        parameters = [likelihood.scale or 0.0, likelihood.noise_prior_scale, 0.0]
        return code, np.array(parameters), y.reshape(rows, -1)
    if kind is BernoulliLikelihood:
        return kernel.BERNOULLI, np.zeros(3), y.reshape(rows, 1)
    if kind is CategoricalLikelihood:
        return kernel.CATEGORICAL, np.zeros(3), np.eye(out_features)[y.astype(np.int64)]
    if kind is HeteroscedasticGaussianLikelihood:
        return kernel.HETEROSCEDASTIC, np.array([0.0, 0.0, likelihood.min_scale]), y.reshape(rows, -1)
    raise Unsupported(f"likelihood {kind.__name__} is not compiled")


class NumbaLogDensity:
    r""":math:`(\log\pi(z), \nabla_z\log\pi(z))` of a flat potential's model, compiled.

    Parameters
    ----------
    potential : FlatPotential
        Supplies the model, the data and the layout of :math:`z`.

    Attributes
    ----------
    buffer : numpy.ndarray
        The kernel's float64 buffer; its address is the ``user_data`` of the C callbacks
        :func:`~bnn.inference.nuts.numba_kernel.nutpie_log_density` and ``nutpie_expand``.

    Raises
    ------
    Unsupported
        Naming the part of the model the kernel does not compile.
    """

    def __init__(self, potential) -> None:
        model = potential.model
        chain = dense_chain(model, "the kernel is compiled")
        if chain.activation not in kernel.ACTIVATION_CODES:
            raise Unsupported(f"activation {chain.activation!r} is not compiled")
        for name, transform in potential.transforms.items():
            if not is_exp(transform):
                raise Unsupported(f"latent {name!r} is mapped by {transform}, not sigma = exp(u)")
        x = potential.x.numpy().astype(np.float64)
        code, parameters, y = likelihood_parameters(model.likelihood, potential.y.numpy().astype(np.float64),
                                                    model.out_features)
        rows, sites = x.shape[0], list(model.sites)
        at = dict(zip(potential.names, np.cumsum([0, *potential.sizes]).tolist()))
        layers = len(sites) // 2
        n_ints = kernel.LAYER_TABLE + layers * kernel.LAYER_FIELDS
        ints = np.zeros(n_ints, dtype=np.int64)
        pieces: list[np.ndarray] = []

        def place(values) -> int:
            """Append ``values`` to the float part; their offset in the buffer."""
            offset = n_ints + sum(piece.size for piece in pieces)
            pieces.append(np.ascontiguousarray(values, dtype=np.float64).reshape(-1))
            return offset

        ints[kernel.ROWS], ints[kernel.LAYERS] = rows, layers
        ints[kernel.ACTIVATION], ints[kernel.LIKELIHOOD] = kernel.ACTIVATION_CODES[chain.activation], code
        ints[kernel.X_AT], ints[kernel.Y_AT], ints[kernel.TARGETS] = place(x), place(y), y.shape[1]
        ints[kernel.LIKELIHOOD_AT] = place(parameters)
        ints[kernel.NOISE_AT] = at.get("sigma", -1)
        ints[kernel.DIM] = potential.dim
        widest = max(site.shape[0] for site in sites)
        ints[kernel.G_AT], ints[kernel.G2_AT] = place(np.zeros(rows * widest)), place(np.zeros(rows * widest))
        for layer in range(layers):
            weight, bias = sites[2 * layer], sites[2 * layer + 1]
            outputs, inputs = weight.shape
            row = kernel.LAYER_TABLE + layer * kernel.LAYER_FIELDS
            ints[row + kernel.D_IN], ints[row + kernel.D_OUT] = inputs, outputs
            ints[row + kernel.W_AT], ints[row + kernel.B_AT] = at[weight.name], at[bias.name]
            ints[row + kernel.A_AT], ints[row + kernel.H_AT] = place(np.zeros(rows * outputs)), place(np.zeros(rows * outputs))
            ints[row + kernel.SCRATCH_AT] = place(np.zeros(outputs * inputs))
            for site, kind_at, parameters_at in ((weight, kernel.W_PRIOR, kernel.W_PRIOR_AT),
                                                 (bias, kernel.B_PRIOR, kernel.B_PRIOR_AT)):
                ints[row + kind_at], site_parameters = prior_parameters(model.prior[site.name], site)
                ints[row + parameters_at] = place(site_parameters)
        ints[kernel.N_INTS] = n_ints
        ints[kernel.N_WORDS] = n_ints + sum(piece.size for piece in pieces)
        self.buffer = np.concatenate([ints.view(np.float64), *pieces])
        self.ints = self.buffer.view(np.int64)[:n_ints]
        self.floats = self.buffer
        self.dim = potential.dim

    def __call__(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        gradient = np.empty(self.dim)
        value = kernel.log_density(np.ascontiguousarray(z, dtype=np.float64), gradient, self.ints, self.floats)
        return value, gradient
