r"""The MLP's log joint and its gradient derived by hand, in NumPy: no autograd, no torch dispatch.

For the network :math:`h_0 = x`, :math:`a_l = h_{l-1} W_l^\top + b_l`, :math:`h_l = \phi(a_l)`
(:math:`l < L`), :math:`f = a_L`, and the log joint

.. math::

    \log\pi(z) = \sum_s \log p_s(W_s) + \log p(\sigma) + \log|\mathrm{d}\sigma/\mathrm{d}u|
                 + \sum_i \log p(y_i \mid f_i, \sigma), \qquad \sigma = e^{u},

the gradient is backpropagation written out:

.. math::

    g_{a_L} = \frac{\partial \log p(y \mid f)}{\partial f}, \quad
    \frac{\partial}{\partial W_l} = g_{a_l}^\top h_{l-1}, \quad
    \frac{\partial}{\partial b_l} = \mathbf{1}^\top g_{a_l}, \quad
    g_{a_{l-1}} = (g_{a_l} W_l) \odot \phi'(a_{l-1}),

with :math:`\partial_f \log p = (y - f)/\sigma^2` (Gaussian), :math:`y - \mathrm{sigmoid}(f)`
(Bernoulli), :math:`\mathrm{onehot}(y) - \mathrm{softmax}(f)` (categorical), and the prior
gradients :math:`-w/s^2` (Gaussian), :math:`-\mathrm{sign}(w)/b` (Laplace),
:math:`-w\,(r_1/\sigma_1^2 + r_2/\sigma_2^2)` (scale mixture, :math:`r_k` the component
responsibilities). For a learned noise with prior :math:`\text{HalfNormal}(c)`,
:math:`\partial_u = \sum_i \big((y_i - f_i)^2/\sigma^2 - 1\big) - \sigma^2/c^2 + 1`.

A gradient here costs a dozen small NumPy calls, where torch autograd's fixed cost per call
dominates on a small network (``benchmarks/results/nuts_speed.md``): this is what lets nutpie
run the model at the speed of its Rust sampler. It covers the prior families and the likelihoods a prior or
likelihood names in its ``fast_form`` (:mod:`bnn.models.fast_forms`; the heteroscedastic Gaussian is the numba
kernel's alone), the activations in :data:`ACTIVATION_DERIVATIVES` and the networks that are a chain of dense layers,
a torch module's lowered to one included (:mod:`bnn.inference.nuts.lowering`); for anything else,
:class:`~bnn.inference.nuts.lowering.Unsupported` says which part, and
:class:`~bnn.inference.nuts.potential.FlatPotential` falls back to torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from bnn.inference.nuts.lowering import Unsupported, chain_inputs, dense_chain
from bnn.models.fast_forms import (
    BernoulliForm,
    CategoricalForm,
    GaussianForm,
    LaplaceForm,
    NormalForm,
    ScaleMixtureForm,
)

HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
Array = np.ndarray


def _sigmoid(a: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def _softplus(a: Array) -> Array:
    """:math:`\\log(1 + e^a)`, stably (a few times faster than ``np.logaddexp(0, a)``)."""
    return np.maximum(a, 0.0) + np.log1p(np.exp(-np.abs(a)))


def _silu_derivative(a: Array, h: Array) -> Array:
    s = _sigmoid(a)
    return s * (1.0 + a * (1.0 - s))


ACTIVATION_DERIVATIVES: dict[str, tuple[Callable[[Array], Array], Callable[[Array, Array], Array]]] = {
    "tanh": (np.tanh, lambda a, h: 1.0 - h * h),
    "relu": (lambda a: np.maximum(a, 0.0), lambda a, h: (a > 0).astype(a.dtype)),
    "sigmoid": (_sigmoid, lambda a, h: h * (1.0 - h)),
    "softplus": (_softplus, lambda a, h: _sigmoid(a)),
    "elu": (lambda a: np.where(a > 0, a, np.expm1(np.minimum(a, 0.0))), lambda a, h: np.where(a > 0, 1.0, h + 1.0)),
    "silu": (lambda a: a * _sigmoid(a), _silu_derivative),
}
"""Activation name -> (:math:`\\phi(a)`, :math:`\\phi'(a)` given :math:`a` and :math:`h = \\phi(a)`)."""


def _normal_prior(form: NormalForm) -> Callable[[Array], tuple[float, Array]]:
    loc, scale = form.loc.double().numpy(), form.scale.double().numpy()
    constant = float(-np.log(scale).sum() - scale.size * HALF_LOG_TWO_PI)

    def log_prior(w: Array) -> tuple[float, Array]:
        z = (w - loc) / scale
        return float(-0.5 * np.dot(z.ravel(), z.ravel()) + constant), -z / scale
    return log_prior


def _laplace_prior(form: LaplaceForm) -> Callable[[Array], tuple[float, Array]]:
    b = form.scale

    def log_prior(w: Array) -> tuple[float, Array]:
        return float(-np.sum(np.abs(w)) / b - w.size * math.log(2.0 * b)), -np.sign(w) / b
    return log_prior


def _scale_mixture_prior(form: ScaleMixtureForm) -> Callable[[Array], tuple[float, Array]]:
    constant_1 = math.log(form.pi) - math.log(form.sigma1) - HALF_LOG_TWO_PI
    constant_2 = math.log1p(-form.pi) - math.log(form.sigma2) - HALF_LOG_TWO_PI

    def log_prior(w: Array) -> tuple[float, Array]:
        w2 = w * w
        log_1 = constant_1 - 0.5 * w2 / form.sigma1**2
        log_2 = constant_2 - 0.5 * w2 / form.sigma2**2
        log_density = np.logaddexp(log_1, log_2)
        r_1 = np.exp(log_1 - log_density)
        return float(np.sum(log_density)), -w * (r_1 / form.sigma1**2 + (1.0 - r_1) / form.sigma2**2)
    return log_prior


PRIOR_GRADIENTS: dict[type, Callable] = {
    NormalForm: _normal_prior,
    LaplaceForm: _laplace_prior,
    ScaleMixtureForm: _scale_mixture_prior,
}
"""Prior family (:mod:`bnn.models.fast_forms`) -> ``form -> (w -> (log p(w), d log p / dw))``."""
LIKELIHOOD_FORMS = (GaussianForm, BernoulliForm, CategoricalForm)
"""The likelihood families with a hand-derived gradient here."""


def is_exp(transform) -> bool:
    """Whether ``transform`` is :math:`u \\mapsto e^u` (``biject_to`` may compose it with an identity affine map)."""
    u = torch.linspace(-3.0, 3.0, 7, dtype=torch.float64)
    value = transform(u)
    return torch.allclose(value, u.exp(), rtol=1e-12, atol=0.0) and torch.allclose(
        transform.log_abs_det_jacobian(u, value), u, rtol=1e-12, atol=1e-12)


class NumpyLogDensity:
    r""":math:`(\log\pi(z), \nabla_z\log\pi(z))` of a flat potential's model, in NumPy float64.

    Parameters
    ----------
    potential : FlatPotential
        Supplies the model, the data and the layout of :math:`z`.

    Raises
    ------
    Unsupported
        Naming the part of the model that has no hand-derived gradient.
    """

    def __init__(self, potential) -> None:
        model = potential.model
        chain = dense_chain(model, "the gradient is written out")
        self.activation, self.activation_derivative = self._activation(chain.activation)
        self.sites = list(model.sites)
        self.priors = [self._prior_gradient(model.prior[site.name], site) for site in self.sites]
        self.likelihood = model.likelihood.fast_form()
        if not isinstance(self.likelihood, LIKELIHOOD_FORMS):
            raise Unsupported(f"likelihood {type(model.likelihood).__name__} states no fast form with a hand-derived "
                              "gradient (Likelihood.fast_form)")
        for name, transform in potential.transforms.items():
            if not is_exp(transform):
                raise Unsupported(f"latent {name!r} is mapped by {transform}, not sigma = exp(u)")
        self.offsets = np.cumsum([0, *potential.sizes])
        self.shapes = [tuple(shape) for shape in potential.shapes.values()]
        self.x = chain_inputs(model, potential.x).numpy()
        y = potential.y.numpy()
        if isinstance(self.likelihood, CategoricalForm):
            self.y = np.eye(model.out_features)[y.astype(np.int64)]
        else:
            self.y = y.reshape(y.shape[0], -1).astype(np.float64)

    @staticmethod
    def _activation(name: str):
        if name not in ACTIVATION_DERIVATIVES:
            raise Unsupported(f"activation {name!r} has no hand-derived derivative")
        return ACTIVATION_DERIVATIVES[name]

    @staticmethod
    def _prior_gradient(prior, site) -> Callable[[Array], tuple[float, Array]]:
        """``w -> (log p(w), d log p / dw)`` of the prior's fast form for ``site``."""
        form = prior.fast_form(site)
        if type(form) not in PRIOR_GRADIENTS:
            raise Unsupported(f"prior {type(prior).__name__} of site {site.name!r} states no fast form with a "
                              "hand-derived gradient (Prior.fast_form)")
        return PRIOR_GRADIENTS[type(form)](form)

    def _pieces(self, z: Array) -> list[Array]:
        return [z[start:stop].reshape(shape) for start, stop, shape in zip(self.offsets, self.offsets[1:], self.shapes)]

    def __call__(self, z: Array) -> tuple[float, Array]:
        pieces = self._pieces(z)
        gradient = np.empty_like(z)
        gradients = self._pieces(gradient)  # views into ``gradient``
        total = 0.0
        n_sites = len(self.sites)
        for prior_gradient, value, grad in zip(self.priors, pieces, gradients):
            log_density, grad[...] = prior_gradient(value)
            total += log_density
        weights = pieces[0:n_sites:2]
        inputs, pre_activations = [], []
        h = self.x
        for layer, (weight, bias) in enumerate(zip(weights, pieces[1:n_sites:2])):
            inputs.append(h)
            a = np.dot(h, weight.T) + bias  # np.dot: several times faster than @ for thin matrices
            h = a if layer == len(weights) - 1 else self.activation(a)
            pre_activations.append((a, h))
        log_likelihood, g = self._likelihood(h, pieces[n_sites:], gradients[n_sites:])
        total += log_likelihood
        for layer in reversed(range(len(weights))):
            if layer != len(weights) - 1:
                a, h = pre_activations[layer]
                g = g * self.activation_derivative(a, h)
            gradients[2 * layer] += np.dot(g.T, inputs[layer])
            gradients[2 * layer + 1] += g.sum(axis=0)
            if layer:
                g = np.dot(g, weights[layer])
        return total, gradient

    def _likelihood(self, f: Array, latents: list[Array], latent_gradients: list[Array]) -> tuple[float, Array]:
        """:math:`\\log p(y \\mid f) (+ \\log p(\\sigma) + u)` and :math:`\\partial/\\partial f`; fills the latents' gradients."""
        y = self.y
        if isinstance(self.likelihood, BernoulliForm):
            return float(np.sum(y * f - _softplus(f))), y - _sigmoid(f)
        if isinstance(self.likelihood, CategoricalForm):
            log_normaliser = np.logaddexp.reduce(f, axis=1, keepdims=True)
            return float(np.sum(y * f) - np.sum(log_normaliser)), y - np.exp(f - log_normaliser)
        residual = y - f
        squared = float(np.dot(residual.ravel(), residual.ravel()))
        if self.likelihood.scale is not None:
            sigma, total = self.likelihood.scale, 0.0
        else:
            (u,), (u_gradient,) = latents, latent_gradients
            sigma, c = math.exp(float(u)), self.likelihood.noise_prior_scale
            total = math.log(2.0) - math.log(c) - HALF_LOG_TWO_PI - 0.5 * sigma**2 / c**2 + float(u)
            u_gradient[...] = squared / sigma**2 - residual.size - sigma**2 / c**2 + 1.0
        total += -0.5 * squared / sigma**2 - residual.size * (math.log(sigma) + HALF_LOG_TWO_PI)
        return float(total), residual / sigma**2
