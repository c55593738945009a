r""":math:`(\log\pi(z), \nabla_z\log\pi(z))` of the collection's MLP by the compiled kernel of
:mod:`bnn.inference.nuts.numba_kernel`, and the buffer that kernel reads.

:class:`NumbaLogDensity` reads the model once: the network's widths, its activation, each site's prior by the
family its :meth:`~bnn.models.priors.Prior.fast_form` names (a Normal with a mean and a precision
:math:`\tau = 1/s^2` per weight and the constant :math:`-\sum_k \log s_k - n \log\sqrt{2\pi}`; Laplace; the
scale mixture), the likelihood's :meth:`~bnn.models.likelihoods.Likelihood.fast_form` and the data, into one float64
buffer whose first words, viewed as int64, are the kernel's table. A part it does not know (a prior or likelihood
that states no fast form, another network class or transform) raises
:class:`~bnn.inference.nuts.lowering.Unsupported`, naming it, and
:class:`~bnn.inference.nuts.potential.FlatPotential` falls back to the next backend.

The buffer holds the kernel's work space too, so one buffer serves one evaluation at a time: one chain.
"""

from __future__ import annotations

import math

import numpy as np
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.nuts import kernel_layout as layout
from bnn.inference.nuts.lowering import Unsupported, chain_inputs, dense_chain
from bnn.inference.nuts.numpy_potential import is_exp
from bnn.models.fast_forms import (
    BernoulliForm,
    CategoricalForm,
    GaussianForm,
    HeteroscedasticGaussianForm,
    LaplaceForm,
    NormalForm,
    ScaleMixtureForm,
)


def prior_parameters(prior, site) -> tuple[int, np.ndarray]:
    """The kernel's prior code and parameters (:func:`~bnn.inference.nuts.numba_kernel.log_prior`) for ``site``, from
    the prior's :meth:`~bnn.models.priors.Prior.fast_form`."""
    size = site.numel
    form = prior.fast_form(site)
    if isinstance(form, NormalForm):
        loc, scale = (np.broadcast_to(value.double().reshape(-1).numpy(), (size,)) for value in (form.loc, form.scale))
        constant = -float(np.log(scale).sum()) - size * layout.HALF_LOG_TWO_PI
        return layout.PRIOR_NORMAL, np.concatenate([[constant], loc, 1.0 / scale**2])
    if isinstance(form, LaplaceForm):
        return layout.PRIOR_LAPLACE, np.array([-size * math.log(2.0 * form.scale), 1.0 / form.scale])
    if isinstance(form, ScaleMixtureForm):
        return layout.PRIOR_SCALE_MIXTURE, np.array([
            math.log(form.pi) - math.log(form.sigma1) - layout.HALF_LOG_TWO_PI,
            math.log1p(-form.pi) - math.log(form.sigma2) - layout.HALF_LOG_TWO_PI,
            1.0 / form.sigma1**2, 1.0 / form.sigma2**2])
    raise Unsupported(f"prior {type(prior).__name__} of site {site.name!r} states no fast form (Prior.fast_form)")


def likelihood_parameters(likelihood, y: np.ndarray, out_features: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The kernel's likelihood code, its parameters (fixed noise, noise prior scale, minimum scale) and the
    targets as a ``(rows, columns)`` array (one-hot for the categorical), from the likelihood's
    :meth:`~bnn.models.likelihoods.Likelihood.fast_form`."""
    rows = y.shape[0]
    form = likelihood.fast_form()
    if isinstance(form, GaussianForm):
        code = layout.GAUSSIAN if form.scale is not None else layout.GAUSSIAN_LEARNED_NOISE
        return code, np.array([form.scale or 0.0, form.noise_prior_scale, 0.0]), y.reshape(rows, -1)
    if isinstance(form, BernoulliForm):
        return layout.BERNOULLI, np.zeros(3), y.reshape(rows, 1)
    if isinstance(form, CategoricalForm):
        return layout.CATEGORICAL, np.zeros(3), np.eye(out_features)[y.astype(np.int64)]
    if isinstance(form, HeteroscedasticGaussianForm):
        return layout.HETEROSCEDASTIC, np.array([0.0, 0.0, form.min_scale]), y.reshape(rows, -1)
    raise Unsupported(f"likelihood {type(likelihood).__name__} states no fast form (Likelihood.fast_form)")


def kernel_gap(model, temperature: float = UNTEMPERED) -> str | None:
    """Why the compiled kernel cannot evaluate ``model``'s potential at ``temperature`` (``None`` when it can): a network
    that is not a chain of dense layers, hierarchical priors, an activation it does not compile, a prior or likelihood
    that states no fast form (:mod:`bnn.models.fast_forms`), a tempered potential. NUTS then runs on a torch
    potential, and says so with its cost (:mod:`bnn.inference.nuts.cost`)."""
    if temperature != UNTEMPERED:
        return f"the kernel evaluates the untempered potential, not temperature {temperature:g}"
    try:
        chain = dense_chain(model, "the kernel is compiled")
    except Unsupported as error:
        return str(error)
    if chain.activation not in layout.ACTIVATION_CODES:
        return f"activation {chain.activation!r} is not compiled"
    for site in model.sites:
        if model.prior[site.name].fast_form(site) is None:
            return (f"prior {type(model.prior[site.name]).__name__} of site {site.name!r} states no fast form "
                    "(Prior.fast_form)")
    if model.likelihood.fast_form() is None:
        return f"likelihood {type(model.likelihood).__name__} states no fast form (Likelihood.fast_form)"
    return None


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
        gap = kernel_gap(model, potential.temperature)
        if gap is not None:
            raise Unsupported(gap)
        chain = dense_chain(model, "the kernel is compiled")
        for name, transform in potential.transforms.items():
            if not is_exp(transform):
                raise Unsupported(f"latent {name!r} is mapped by {transform}, not sigma = exp(u)")
        x = chain_inputs(model, potential.x).numpy().astype(np.float64)
        code, parameters, y = likelihood_parameters(model.likelihood, potential.y.numpy().astype(np.float64),
                                                    model.out_features)
        rows, sites = x.shape[0], list(model.sites)
        at = dict(zip(potential.names, np.cumsum([0, *potential.sizes]).tolist()))
        layers = len(sites) // 2
        n_ints = layout.LAYER_TABLE + layers * layout.LAYER_FIELDS
        ints = np.zeros(n_ints, dtype=np.int64)
        pieces: list[np.ndarray] = []

        def place(values) -> int:
            """Append ``values`` to the float part; their offset in the buffer."""
            offset = n_ints + sum(piece.size for piece in pieces)
            pieces.append(np.ascontiguousarray(values, dtype=np.float64).reshape(-1))
            return offset

        ints[layout.ROWS], ints[layout.LAYERS] = rows, layers
        ints[layout.ACTIVATION], ints[layout.LIKELIHOOD] = layout.ACTIVATION_CODES[chain.activation], code
        ints[layout.X_AT], ints[layout.Y_AT], ints[layout.TARGETS] = place(x), place(y), y.shape[1]
        ints[layout.LIKELIHOOD_AT] = place(parameters)
        ints[layout.NOISE_AT] = at.get("sigma", -1)
        ints[layout.DIM] = potential.dim
        widest = max(site.shape[0] for site in sites)
        ints[layout.G_AT], ints[layout.G2_AT] = place(np.zeros(rows * widest)), place(np.zeros(rows * widest))
        for layer in range(layers):
            weight, bias = sites[2 * layer], sites[2 * layer + 1]
            outputs, inputs = weight.shape
            row = layout.LAYER_TABLE + layer * layout.LAYER_FIELDS
            ints[row + layout.D_IN], ints[row + layout.D_OUT] = inputs, outputs
            ints[row + layout.W_AT], ints[row + layout.B_AT] = at[weight.name], at[bias.name]
            ints[row + layout.A_AT], ints[row + layout.H_AT] = place(np.zeros(rows * outputs)), place(np.zeros(rows * outputs))
            ints[row + layout.SCRATCH_AT] = place(np.zeros(outputs * inputs))
            for site, kind_at, parameters_at in ((weight, layout.W_PRIOR, layout.W_PRIOR_AT),
                                                 (bias, layout.B_PRIOR, layout.B_PRIOR_AT)):
                ints[row + kind_at], site_parameters = prior_parameters(model.prior[site.name], site)
                ints[row + parameters_at] = place(site_parameters)
        ints[layout.N_INTS] = n_ints
        ints[layout.N_WORDS] = n_ints + sum(piece.size for piece in pieces)
        self.buffer = np.concatenate([ints.view(np.float64), *pieces])
        self.ints = self.buffer.view(np.int64)[:n_ints]
        self.floats = self.buffer
        self.dim = potential.dim
        from bnn.inference.nuts.numba_kernel import log_density  # numba loads at the first compiled potential

        self._log_density = log_density

    def __call__(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        gradient = np.empty(self.dim)
        value = self._log_density(np.ascontiguousarray(z, dtype=np.float64), gradient, self.ints, self.floats)
        return value, gradient
