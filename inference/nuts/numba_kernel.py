r"""The MLP's log joint and its gradient, compiled by numba: one machine-code function, no Python per call.

The model is read once into one float64 buffer (:mod:`bnn.inference.nuts.numba_potential` lays it out): its
first ``ints[N_INTS]`` words, viewed as int64, describe the network (the table below); the rest hold the data,
the priors' constants and the work space. :func:`log_density` takes the flat latent vector :math:`z`, fills
:math:`\nabla_z \log\pi(z)` and returns :math:`\log\pi(z)`, allocating nothing: with
:math:`h_0 = x`, :math:`a_l = h_{l-1} W_l^\top + b_l`, :math:`h_l = \phi(a_l)`, :math:`f = a_L`,

.. math::

    \log\pi(z) = \sum_s \log p_s(W_s) + \log p(y \mid f, \theta) \;(+ \log p(\sigma) + u,\ \sigma = e^u),

    g_{a_L} = \partial_f \log p(y \mid f), \quad \nabla_{W_l} = g_{a_l}^\top h_{l-1}, \quad
    \nabla_{b_l} = \mathbf{1}^\top g_{a_l}, \quad g_{a_{l-1}} = (g_{a_l} W_l) \odot \phi'(a_{l-1}).

The priors: Normal with a mean and a precision per weight (:math:`-\tfrac12 \sum_k \tau_k (w_k - m_k)^2 + c`,
gradient :math:`-\tau_k (w_k - m_k)`), Laplace (:math:`-\sum_k |w_k| / b + c`, gradient :math:`-\mathrm{sign}(w_k)/b`)
and the two-Gaussian scale mixture (gradient :math:`-w_k (r_k \tau_1 + (1 - r_k) \tau_2)`, :math:`r_k` the first
component's responsibility). The likelihoods: Gaussian (:math:`\partial_f = (y - f)/\sigma^2`; for a learned
:math:`\sigma \sim \text{HalfNormal}(c)`, :math:`\partial_u = \sum (y - f)^2/\sigma^2 - n - \sigma^2/c^2 + 1`),
Bernoulli (:math:`y - \mathrm{sigmoid}(f)`), categorical (:math:`\mathrm{onehot}(y) - \mathrm{softmax}(f)`) and the
heteroscedastic Gaussian (:math:`s = \mathrm{softplus}(f_s) + s_{min}`, :math:`\partial_{f_\mu} = r/s^2`,
:math:`\partial_{f_s} = (r^2/s^3 - 1/s)\,\mathrm{sigmoid}(f_s)`), torch's softplus threshold (the identity above 20)
included, so that the gradients are torch's.

The loops run over the output units innermost (weights transposed into the work space first), so that LLVM
vectorises them without reassociating a sum (``fastmath=False``: the sums keep their order). ``tanh`` and the
sigmoid come from :func:`reduced_exponential`, a Cody-Waite reduction and a degree-13 polynomial that vectorises
where the C library's ``tanh`` is a call per element; it is accurate to a few units in the last place.

:func:`nutpie_log_density` and :func:`nutpie_expand` are the C callbacks nutpie's sampler calls directly (the
signatures of nutpie's own numba backend), so a leapfrog step never enters Python.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from bnn.inference.nuts.kernel_layout import (
    A_AT,
    ACTIVATION,
    B_AT,
    B_PRIOR,
    B_PRIOR_AT,
    BERNOULLI,
    CATEGORICAL,
    D_IN,
    D_OUT,
    DIM,
    G2_AT,
    G_AT,
    GAUSSIAN,
    GAUSSIAN_LEARNED_NOISE,
    H_AT,
    HALF_LOG_TWO_PI,
    LAYER_FIELDS,
    LAYER_TABLE,
    LAYERS,
    LIKELIHOOD,
    LIKELIHOOD_AT,
    N_INTS,
    N_WORDS,
    NOISE_AT,
    PRIOR_LAPLACE,
    PRIOR_NORMAL,
    ROWS,
    SCRATCH_AT,
    TARGETS,
    W_AT,
    W_PRIOR,
    W_PRIOR_AT,
    X_AT,
    Y_AT,
)
from numba import types

SOFTPLUS_THRESHOLD = 20.0  # torch's: softplus(a) = a above it
LOG2E = 1.0 / math.log(2.0)
LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that k * LN2_HI is exact for |k| < 2^11
LN2_LO = 1.90821492927058770002e-10
SMALLEST_EXPONENT = -708.0  # e^-708 is still a normal float64
POW2_NEGATIVE = np.ldexp(1.0, -np.arange(1024))
EXPM1_COEFFICIENTS = tuple(1.0 / math.factorial(i) for i in range(13, 1, -1))  # 1/13!, ..., 1/2!


def jit(function):
    """``numba.njit(cache=True)``, without the cache where numba finds no writable cache folder."""
    try:
        return numba.njit(cache=True, fastmath=False, error_model="numpy")(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(fastmath=False, error_model="numpy")(function)


def c_callback(signature):
    """``numba.cfunc(signature, cache=True)``, without the cache where numba finds no writable cache folder."""

    def compile_callback(function):
        try:
            return numba.cfunc(signature, cache=True, error_model="numpy")(function)
        except RuntimeError:
            return numba.cfunc(signature, error_model="numpy")(function)

    return compile_callback


@jit
def reduced_exponential(x: float) -> tuple[float, float]:
    r""":math:`(2^k, \mathrm{expm1}(r))` with :math:`e^x = 2^k e^r` for :math:`x \le 0` (clamped at -708).

    :math:`x = k \ln 2 + r`, :math:`|r| \le \ln 2 / 2` (Cody-Waite), and
    :math:`\mathrm{expm1}(r) = \sum_{i=1}^{13} r^i / i!` (truncation below :math:`10^{-17}`).
    """
    x = max(x, SMALLEST_EXPONENT)
    k = math.floor(x * LOG2E + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = EXPM1_COEFFICIENTS[0]
    for c in EXPM1_COEFFICIENTS[1:]:
        p = p * r + c
    return POW2_NEGATIVE[int(-k)], r + r * r * p


@jit
def expm1_nonpositive(x: float) -> float:
    r""":math:`e^x - 1 = 2^k\,\mathrm{expm1}(r) + (2^k - 1)` for :math:`x \le 0`, accurate near 0."""
    scale, q = reduced_exponential(x)
    return scale * q + (scale - 1.0)


@jit
def sigmoid(a: float) -> float:
    r""":math:`1 / (1 + e^{-a})` from :math:`e = e^{-|a|}`: :math:`1/(1 + e)` for :math:`a \ge 0`, else :math:`e/(1 + e)`."""
    scale, q = reduced_exponential(-abs(a))
    e = scale * (1.0 + q)
    return 1.0 / (1.0 + e) if a >= 0.0 else e / (1.0 + e)


@jit
def softplus(a: float) -> float:
    """torch's softplus: :math:`\\log(1 + e^a)`, :math:`a` itself above the threshold."""
    return a if a > SOFTPLUS_THRESHOLD else max(a, 0.0) + math.log1p(math.exp(-abs(a)))


@jit
def activate(code: int, a, h) -> None:
    """``h = phi(a)`` elementwise for the activation ``code`` (:data:`ACTIVATION_CODES`)."""
    if code == 0:
        for i in range(a.size):
            m = expm1_nonpositive(-2.0 * abs(a[i]))  # tanh|a| = -m / (2 + m)
            h[i] = math.copysign(-m / (2.0 + m), a[i])
    elif code == 1:
        for i in range(a.size):
            h[i] = max(a[i], 0.0)
    elif code == 2:
        for i in range(a.size):
            h[i] = sigmoid(a[i])
    elif code == 3:
        for i in range(a.size):
            h[i] = softplus(a[i])
    elif code == 4:
        for i in range(a.size):
            h[i] = a[i] if a[i] > 0.0 else math.expm1(a[i])
    elif code == 5:
        for i in range(a.size):
            h[i] = a[i] * sigmoid(a[i])
    else:
        for i in range(a.size):
            h[i] = 0.5 * a[i] * (1.0 + math.erf(a[i] / math.sqrt(2.0)))


@jit
def times_derivative(code: int, a, h, g) -> None:
    r"""``g *= phi'(a)`` elementwise, given :math:`a` and :math:`h = \phi(a)`."""
    if code == 0:
        for i in range(g.size):
            g[i] *= 1.0 - h[i] * h[i]
    elif code == 1:
        for i in range(g.size):
            g[i] = g[i] if a[i] > 0.0 else 0.0
    elif code == 2:
        for i in range(g.size):
            g[i] *= h[i] * (1.0 - h[i])
    elif code == 3:
        for i in range(g.size):
            g[i] *= 1.0 if a[i] > SOFTPLUS_THRESHOLD else sigmoid(a[i])
    elif code == 4:
        for i in range(g.size):
            g[i] *= 1.0 if a[i] > 0.0 else h[i] + 1.0
    elif code == 5:
        for i in range(g.size):
            s = sigmoid(a[i])
            g[i] *= s * (1.0 + a[i] * (1.0 - s))
    else:
        for i in range(g.size):
            cdf = 0.5 * (1.0 + math.erf(a[i] / math.sqrt(2.0)))
            g[i] *= cdf + a[i] * math.exp(-0.5 * a[i] * a[i] - HALF_LOG_TWO_PI)


@jit
def log_prior(kind: int, parameters, w, gradient) -> float:
    """:math:`\\log p(w)` of one site; writes its gradient into ``gradient`` (see the module notes)."""
    total = 0.0
    if kind == PRIOR_NORMAL:  # parameters: constant, means, precisions
        loc, precision = parameters[1:1 + w.size], parameters[1 + w.size:1 + 2 * w.size]
        for i in range(w.size):
            d = w[i] - loc[i]
            total += d * d * precision[i]
            gradient[i] = -d * precision[i]
        return parameters[0] - 0.5 * total
    if kind == PRIOR_LAPLACE:  # parameters: constant, 1 / b
        for i in range(w.size):
            total += abs(w[i])
            gradient[i] = -np.sign(w[i]) * parameters[1]
        return parameters[0] - total * parameters[1]
    # scale mixture; parameters: log(pi) - log(s1) - log sqrt(2 pi), the same for 1 - pi and s2, 1/s1^2, 1/s2^2
    for i in range(w.size):
        w2 = w[i] * w[i]
        log_1 = parameters[0] - 0.5 * w2 * parameters[2]
        log_2 = parameters[1] - 0.5 * w2 * parameters[3]
        top = max(log_1, log_2)
        log_density = top + math.log(math.exp(log_1 - top) + math.exp(log_2 - top))
        r_1 = math.exp(log_1 - log_density)
        total += log_density
        gradient[i] = -w[i] * (r_1 * parameters[2] + (1.0 - r_1) * parameters[3])
    return total


@jit
def log_likelihood(kind: int, parameters, f, y, g, z, gradient, noise_at: int) -> float:
    r""":math:`\log p(y \mid f)` (and the noise's prior and Jacobian); ``g`` gets :math:`\partial/\partial f`.

    ``parameters``: the fixed noise :math:`\sigma`, the noise prior's :math:`c`, :math:`s_{min}`.
    """
    rows, outputs = f.shape
    total = 0.0
    if kind == GAUSSIAN or kind == GAUSSIAN_LEARNED_NOISE:
        squared = 0.0
        for i in range(rows):
            for j in range(outputs):
                r = y[i, j] - f[i, j]
                squared += r * r
                g[i, j] = r
        n = rows * outputs
        if kind == GAUSSIAN:
            sigma = parameters[0]
        else:
            u = z[noise_at]
            sigma, c = math.exp(u), parameters[1]
            total = math.log(2.0) - math.log(c) - HALF_LOG_TWO_PI - 0.5 * sigma * sigma / (c * c) + u
            gradient[noise_at] = squared / (sigma * sigma) - n - sigma * sigma / (c * c) + 1.0
        variance = sigma * sigma
        for i in range(rows):
            for j in range(outputs):
                g[i, j] /= variance
        return total - 0.5 * squared / variance - n * (math.log(sigma) + HALF_LOG_TWO_PI)
    if kind == BERNOULLI:
        for i in range(rows):
            total += y[i, 0] * f[i, 0] - (max(f[i, 0], 0.0) + math.log1p(math.exp(-abs(f[i, 0]))))
            g[i, 0] = y[i, 0] - sigmoid(f[i, 0])
        return total
    if kind == CATEGORICAL:
        for i in range(rows):
            top = f[i, 0]
            for j in range(1, outputs):
                top = max(top, f[i, j])
            normaliser = 0.0
            for j in range(outputs):
                normaliser += math.exp(f[i, j] - top)
            log_normaliser = top + math.log(normaliser)
            for j in range(outputs):
                total += y[i, j] * f[i, j]
                g[i, j] = y[i, j] - math.exp(f[i, j] - log_normaliser)
            total -= log_normaliser
        return total
    targets = outputs // 2  # heteroscedastic: means, then raw scales
    for i in range(rows):
        for j in range(targets):
            raw = f[i, targets + j]
            s = softplus(raw) + parameters[2]
            r = y[i, j] - f[i, j]
            total += -0.5 * (r / s) ** 2 - math.log(s) - HALF_LOG_TWO_PI
            g[i, j] = r / (s * s)
            g[i, targets + j] = (r * r / (s * s * s) - 1.0 / s) * (1.0 if raw > SOFTPLUS_THRESHOLD else sigmoid(raw))
    return total


@jit
def affine(h, w, b, a) -> None:
    """``a = h @ w.T + b`` (BLAS)."""
    np.dot(h, w.T, a)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] += b[j]


@jit
def add_weight_gradient(g, h, scratch, gw, gb) -> None:
    """``gw += g.T @ h`` (BLAS, through ``scratch``) and ``gb += 1^T g``."""
    np.dot(g.T, h, scratch)
    for j in range(gw.shape[0]):
        for k in range(gw.shape[1]):
            gw[j, k] += scratch[j, k]
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            gb[j] += g[i, j]


@jit
def log_density(z, gradient, ints, floats) -> float:
    r""":math:`\log\pi(z)`; fills ``gradient`` with :math:`\nabla_z\log\pi(z)`. ``ints`` and ``floats`` are two
    views of the buffer (int64 and float64)."""
    rows, layers, code = ints[ROWS], ints[LAYERS], ints[ACTIVATION]
    gradient[:] = 0.0
    total = 0.0
    for layer in range(layers):
        t = LAYER_TABLE + layer * LAYER_FIELDS
        w_size = ints[t + D_IN] * ints[t + D_OUT]
        total += log_prior(ints[t + W_PRIOR], floats[ints[t + W_PRIOR_AT]:], z[ints[t + W_AT]:ints[t + W_AT] + w_size],
                           gradient[ints[t + W_AT]:ints[t + W_AT] + w_size])
        total += log_prior(ints[t + B_PRIOR], floats[ints[t + B_PRIOR_AT]:],
                           z[ints[t + B_AT]:ints[t + B_AT] + ints[t + D_OUT]],
                           gradient[ints[t + B_AT]:ints[t + B_AT] + ints[t + D_OUT]])
    h = floats[ints[X_AT]:ints[X_AT] + rows * ints[LAYER_TABLE + D_IN]].reshape((rows, ints[LAYER_TABLE + D_IN]))
    for layer in range(layers):
        t = LAYER_TABLE + layer * LAYER_FIELDS
        inputs, outputs = ints[t + D_IN], ints[t + D_OUT]
        w = z[ints[t + W_AT]:ints[t + W_AT] + outputs * inputs].reshape((outputs, inputs))
        a = floats[ints[t + A_AT]:ints[t + A_AT] + rows * outputs].reshape((rows, outputs))
        affine(h, w, z[ints[t + B_AT]:ints[t + B_AT] + outputs], a)
        h = a
        if layer < layers - 1:
            h = floats[ints[t + H_AT]:ints[t + H_AT] + rows * outputs].reshape((rows, outputs))
            activate(code, floats[ints[t + A_AT]:ints[t + A_AT] + rows * outputs],
                     floats[ints[t + H_AT]:ints[t + H_AT] + rows * outputs])
    outputs = ints[LAYER_TABLE + (layers - 1) * LAYER_FIELDS + D_OUT]
    y = floats[ints[Y_AT]:ints[Y_AT] + rows * ints[TARGETS]].reshape((rows, ints[TARGETS]))
    g = floats[ints[G_AT]:ints[G_AT] + rows * outputs].reshape((rows, outputs))
    total += log_likelihood(ints[LIKELIHOOD], floats[ints[LIKELIHOOD_AT]:], h, y, g, z, gradient, ints[NOISE_AT])
    g_at, spare_at = ints[G_AT], ints[G2_AT]
    for layer in range(layers - 1, -1, -1):
        t = LAYER_TABLE + layer * LAYER_FIELDS
        inputs, outputs = ints[t + D_IN], ints[t + D_OUT]
        g = floats[g_at:g_at + rows * outputs].reshape((rows, outputs))
        if layer < layers - 1:
            times_derivative(code, floats[ints[t + A_AT]:ints[t + A_AT] + rows * outputs],
                             floats[ints[t + H_AT]:ints[t + H_AT] + rows * outputs], g.ravel())
        if layer == 0:
            h = floats[ints[X_AT]:ints[X_AT] + rows * inputs].reshape((rows, inputs))
        else:
            below = t - LAYER_FIELDS
            h = floats[ints[below + H_AT]:ints[below + H_AT] + rows * inputs].reshape((rows, inputs))
        scratch = floats[ints[t + SCRATCH_AT]:ints[t + SCRATCH_AT] + outputs * inputs].reshape((outputs, inputs))
        add_weight_gradient(g, h, scratch, gradient[ints[t + W_AT]:ints[t + W_AT] + outputs * inputs].reshape((outputs, inputs)),
                            gradient[ints[t + B_AT]:ints[t + B_AT] + outputs])
        if layer:
            w = z[ints[t + W_AT]:ints[t + W_AT] + outputs * inputs].reshape((outputs, inputs))
            np.dot(g, w, floats[spare_at:spare_at + rows * inputs].reshape((rows, inputs)))
            g_at, spare_at = spare_at, g_at
    return total


LOG_DENSITY_SIGNATURE = types.int64(types.uint64, types.CPointer(types.double), types.CPointer(types.double),
                                    types.CPointer(types.double), types.voidptr)
EXPAND_SIGNATURE = types.int64(types.uint64, types.uint64, types.CPointer(types.double), types.CPointer(types.double),
                               types.voidptr)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", numba.NumbaExperimentalFeatureWarning)

    @c_callback(LOG_DENSITY_SIGNATURE)
    def nutpie_log_density(dim, z_pointer, gradient_pointer, value_pointer, buffer_pointer):
        """nutpie's ``logp(dim, x, grad, logp, user_data) -> status``, the buffer as ``user_data`` (0: done)."""
        head = numba.carray(buffer_pointer, (LAYER_TABLE,), np.int64)
        if dim != head[DIM]:
            return -1
        ints = numba.carray(buffer_pointer, (head[N_WORDS],), np.int64)[:head[N_INTS]]
        floats = numba.carray(buffer_pointer, (head[N_WORDS],), np.float64)
        value = numba.carray(value_pointer, (1,))
        value[0] = log_density(numba.carray(z_pointer, (dim,)), numba.carray(gradient_pointer, (dim,)), ints, floats)
        return 0

    @c_callback(EXPAND_SIGNATURE)
    def nutpie_expand(dim, expanded, z_pointer, out_pointer, buffer_pointer):
        """nutpie's ``expand(dim, n_expanded, x, out, user_data) -> status``: the draw is ``z`` itself."""
        if dim != expanded:
            return -1
        numba.carray(out_pointer, (dim,))[:] = numba.carray(z_pointer, (dim,))
        return 0
