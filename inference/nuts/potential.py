r"""The model's log joint as a function of one flat unconstrained vector, compiled once.

For a :class:`~bnn.models.network.BayesianNetwork` with weight sites :math:`W_s`, likelihood latents
:math:`\theta_j` (such as a learned noise :math:`\sigma`) and data :math:`(x, y)`, the flat
vector :math:`z = [\operatorname{vec} W_1, \dots, \operatorname{vec} T_j(\theta_j), \dots]`
holds every latent in the unconstrained space, :math:`T_j` = ``biject_to(support)^{-1}``
(:math:`z = \log\sigma` for a positive :math:`\sigma`), and

.. math::

    \log \pi(z) = \sum_s \log p_s(W_s) + \sum_j \Big[\log p_j\big(T_j^{-1}(z_j)\big)
                  + \log\big|\det J_{T_j^{-1}}(z_j)\big|\Big]
                  + \sum_{i=1}^N \log p\big(y_i \mid f(x_i; W), \theta\big),

with each :math:`p_s` the model's own prior object (``model.prior[s].distribution(site)``)
and the likelihood ``model.observation_distribution``. A site of a hierarchical prior
(:mod:`bnn.models.hierarchical_priors`) enters non-centred, as the program draws it: its standardised weights
:math:`z_s \sim \mathcal{N}(0, I)` in :math:`z`, its scales :math:`\xi` among the positive latents
(:math:`\log\xi` in :math:`z`, with their hyperprior and Jacobian), and :math:`W_s = s(\xi) \odot z_s` in the
likelihood; the compiled kernels (``numba``, ``numpy``) refuse it, so ``auto`` takes a torch backend. It equals Pyro's trace-based
potential :math:`-U(z)` (see :mod:`bnn.inference.nuts.fit`), without the trace: one small graph of
tensor operations that ``torch.compile`` or TorchScript can compile, evaluated with its
gradient :math:`\nabla_z \log\pi` in float64 by :meth:`FlatPotential.value_and_grad`.

That formula describes the program :meth:`bnn.models.network.BayesianNetwork.__call__` runs; a model whose
program differs (a subclass with a site of its own, a changed likelihood) needs Pyro's
generic potential instead, :class:`TracePotential`, which evaluates the program's trace.
:func:`flat_potential_mismatch` tells the two cases apart before sampling: the flat
potential is used only when the trace's latent sites (names, shapes, supports) are the
model's and the two log densities differ by one constant at a few random points.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from enum import Enum

import numpy as np
import pyro
import torch
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.nuts.numba_potential import NumbaLogDensity
from bnn.inference.nuts.numpy_potential import NumpyLogDensity, Unsupported
from bnn.models.network import DECENTRED, MAX_PLATE_NESTING
from pyro.infer.mcmc.util import initialize_model
from pyro.poutine.util import site_is_subsample
from torch.distributions import biject_to, constraints

from bnn.options import parse_option
from bnn.runtime.jit_deprecation import torch_jit_deprecation_ignored
from bnn.runtime.timing import median_seconds

STANDARD_NORMAL = torch.distributions.Normal(0.0, 1.0)
CHECK_RTOL = 1e-8  # a compiled log density must reproduce the eager one to this relative error
COMPILE_PAYS_OFF_SECONDS = 120.0
"""``auto`` tries ``compile`` for a run whose gradients on ``trace`` would take longer than this: about five of
compile's builds with an empty cache, so that a build the run's trees do not need (they stop short of the count the
caller expects, its worst case) costs at most a fifth of that."""
MISMATCH_POINTS = 3  # random points at which the flat potential must equal Pyro's up to one constant


class PotentialKind(str, Enum):
    """Which flat potential a NUTS chain of the nutpie engine evaluates."""

    FLAT = "flat"
    """:class:`FlatPotential`: the model's own parts, fast; only where :func:`flat_potential_mismatch` finds none."""
    TRACE = "trace"
    """:class:`TracePotential`: Pyro's trace-based potential, right for any Pyro program, eager and slower."""


class Backend(str, Enum):
    """How :class:`FlatPotential` evaluates :math:`\\log\\pi(z)` and its gradient.

    From the fastest per value and gradient on toy1d (1-50-1 tanh, N=100, 152 latents, one thread) to the
    slowest: ``numpy``, ``compile``, ``trace``, ``eager``; ``python -m benchmarks.nuts_speed`` measures them
    and their build times (``benchmarks/results/nuts_speed.md``).
    """

    AUTO = "auto"
    """The first of ``numba``, ``numpy``, ``trace``, ``eager`` that builds and reproduces the eager value and
    gradient; in place of ``trace``, ``compile`` when the run is long enough to pay for its build (the gradients the
    caller expects times ``trace``'s time for one exceed :data:`COMPILE_PAYS_OFF_SECONDS`) and it is faster at the
    probe point."""
    NUMBA = "numba"
    """The compiled kernel of :mod:`bnn.inference.nuts.numba_kernel` (the collection's own priors, likelihoods and
    activations only); the nutpie engine calls it from Rust without entering Python."""
    NUMPY = "numpy"
    """The hand-derived gradient of :mod:`bnn.inference.nuts.numpy_potential`: the collection's own priors,
    likelihoods and activations only."""
    COMPILE = "compile"
    """``torch.compile`` (Inductor) of the value and its gradient in one graph (:func:`torch.func.grad_and_value`):
    the fastest torch backend per call, the slowest to build (in every chain process, with an empty Inductor cache;
    ``benchmarks/nuts_speed.py`` times both)."""
    TRACE = "trace"
    """TorchScript ``torch.jit.trace``: quick to build."""
    EAGER = "eager"
    """Plain PyTorch, no compilation."""


class FlatLayout:
    r"""The flat unconstrained vector :math:`z`: site ``name`` holds ``shapes[name]`` consecutive entries
    (the unconstrained shape), mapped to the site's support by ``transforms[name]`` (identity when absent).

    Attributes
    ----------
    names : list of str
        The latent sites in the order of ``z``.
    dim : int
        Length of ``z``.
    """

    def __init__(self, shapes: dict[str, torch.Size], transforms: dict[str, Callable]) -> None:
        self.shapes = dict(shapes)
        self.names = list(self.shapes)
        self.transforms = dict(transforms)
        self.sizes = [math.prod(shape) for shape in self.shapes.values()]
        self.dim = sum(self.sizes)

    def unconstrained(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """``z`` of shape ``(*sample, dim)`` split into the sites, ``(*sample, *site_shape)``."""
        pieces = torch.split(z, self.sizes, dim=-1)
        return {name: piece.reshape(z.shape[:-1] + self.shapes[name]) for name, piece in zip(self.names, pieces)}

    def constrained(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        r"""The site values :math:`T^{-1}(z)` (weights unchanged, e.g. :math:`\sigma = e^{z_\sigma}`)."""
        values = self.unconstrained(z)
        return {name: self.transforms[name](value) if name in self.transforms else value
                for name, value in values.items()}

    def flatten(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        """Inverse of :meth:`unconstrained` for one point: unconstrained site values -> ``(dim,)`` float64."""
        return torch.cat([values[name].reshape(-1) for name in self.names]).to(torch.float64)

    def value_and_grad(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        r""":math:`(\log\pi(z), \nabla_z\log\pi(z))` for a float64 numpy ``z``, as nutpie wants them
        (``_value_and_grad``, set by the subclass)."""
        return self._value_and_grad(np.asarray(z, dtype=np.float64))


class FlatPotential(FlatLayout):
    r""":math:`\log\pi(z)` of ``model`` given ``(x, y)`` for a flat unconstrained float64 ``z``.

    Parameters
    ----------
    model : BayesianNetwork
        The model; its priors and likelihood are read once, at construction.
    x, y : torch.Tensor
        The training data.
    backend : Backend or str
        See :class:`Backend`; the chosen one is :attr:`backend` (never ``auto``).
    temperature : float
        The likelihood's temperature :math:`T` (:mod:`bnn.inference.core.temperature`): the log-likelihood enters
        as :math:`\tfrac{1}{T}\log p(y \mid f(x; W), \theta)`; the compiled kernels (``numba``, ``numpy``) evaluate
        only :math:`T = 1`, so ``auto`` takes a torch backend otherwise.
    gradients : int, optional
        The evaluations the caller expects to make (a NUTS chain's at full tree depth), by which ``auto`` judges
        whether ``compile``'s build pays off; ``None``: never.

    Attributes
    ----------
    names : list of str
        The latent sites in the order of ``z`` (``model.latent_shapes``).
    dim : int
        Length of ``z``.
    evaluator : callable
        ``z -> (value, gradient)`` of the chosen backend (a
        :class:`~bnn.inference.nuts.numba_potential.NumbaLogDensity` for ``numba``).
    """

    def __init__(self, model, x: torch.Tensor, y: torch.Tensor, *, backend: Backend | str = Backend.AUTO,
                 temperature: float = UNTEMPERED, gradients: int | None = None) -> None:
        backend = parse_option(Backend, backend, "backend")
        self.model, self.temperature, self.gradients = model, temperature, gradients
        self.x, self.y = x.to(torch.float64), y if not y.is_floating_point() else y.to(torch.float64)
        latent_priors = model.non_weight_priors()
        super().__init__(model.program_latent_shapes,
                         {name: biject_to(prior.support) for name, prior in latent_priors.items()})
        self._latent_priors = latent_priors
        for name, transform in self.transforms.items():
            if transform.inverse_shape(self.shapes[name]) != self.shapes[name]:
                raise ValueError(f"latent {name!r}: transforms that change the shape are not supported")
        self.backend, self.evaluator = self._build(backend)
        self._value_and_grad = self.evaluator

    def log_density(self, z: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\pi(z)` for one point ``z`` of shape ``(dim,)``, as a 0-d tensor (eager)."""
        model, values = self.model, self.unconstrained(z)
        total = z.new_zeros(())
        hierarchical = model.hierarchical_sites
        for site in model.sites:
            if site.name in hierarchical:  # the standardised weights, N(0, 1)
                total = total + STANDARD_NORMAL.log_prob(values[site.name + DECENTRED]).sum()
            else:
                total = total + model.prior[site.name].distribution(site).log_prob(values[site.name]).sum()
        for name, transform in self.transforms.items():
            value = transform(values[name])
            log_jacobian = transform.log_abs_det_jacobian(values[name], value)
            total = total + self._latent_priors[name].log_prob(value).sum() + log_jacobian.sum()
            values[name] = value
        log_likelihood = model.observation_distribution(self.x, model.reported_values(values)).log_prob(self.y).sum()
        return total + log_likelihood / self.temperature

    # ------------------------------------------------------------- compilation
    def _build(self, backend: Backend):
        """The first working evaluator of the backends to try, checked against the eager value and gradient
        at a fixed point away from zero (where activations and priors are least generic)."""
        candidates = [Backend.NUMBA, Backend.NUMPY, Backend.TRACE, Backend.EAGER] if backend is Backend.AUTO else [backend]
        probe = torch.linspace(-1.5, 1.0, self.dim, dtype=torch.float64)
        expected_value, expected_gradient = torch_evaluator(self.log_density)(probe.numpy())
        failures = []
        for candidate in candidates:
            try:
                evaluator = self._checked(candidate, probe, expected_value, expected_gradient)
            except Exception as error:  # noqa: BLE001 - any failure to build moves on to the next backend
                if backend is not Backend.AUTO:
                    raise
                failures.append(f"{candidate.value}: {type(error).__name__}: {error}")
                continue
            if backend is Backend.AUTO and candidate is Backend.TRACE:
                return self._compiled_if_faster(evaluator, probe, expected_value, expected_gradient)
            return candidate, evaluator
        raise RuntimeError("no backend could evaluate the potential: " + "; ".join(failures))

    def _checked(self, backend: Backend, probe: torch.Tensor, expected_value: float, expected_gradient: np.ndarray):
        """The evaluator of ``backend``, refused (``RuntimeError``) unless it reproduces the eager value and gradient
        at ``probe`` (its first call, where ``torch.compile`` compiles: it meets torch's TorchScript deprecation too)."""
        evaluator = self._evaluator(backend, probe)
        with torch_jit_deprecation_ignored():
            value, gradient = evaluator(probe.numpy())
        if not math.isclose(value, expected_value, rel_tol=CHECK_RTOL, abs_tol=CHECK_RTOL):
            raise RuntimeError(f"it gives {value!r}, the eager log density {expected_value!r}")
        if not np.allclose(gradient, expected_gradient, rtol=CHECK_RTOL, atol=CHECK_RTOL):
            raise RuntimeError("its gradient differs from the eager gradient")
        return evaluator

    def _compiled_if_faster(self, traced, probe: torch.Tensor, expected_value: float, expected_gradient: np.ndarray):
        r"""``(TRACE, traced)``, or ``(COMPILE, compiled)`` when the run pays for compile's build,
        :math:`G\,t_{\text{trace}} >` :data:`COMPILE_PAYS_OFF_SECONDS` for the :math:`G` gradients expected, and the
        compiled evaluator reproduces the eager one and is faster at the probe point."""
        point = probe.numpy()
        if self.gradients is None:
            return Backend.TRACE, traced
        trace_seconds = median_seconds(lambda: traced(point))
        if self.gradients * trace_seconds <= COMPILE_PAYS_OFF_SECONDS:
            return Backend.TRACE, traced
        try:
            compiled = self._checked(Backend.COMPILE, probe, expected_value, expected_gradient)
        except Exception:  # noqa: BLE001 - a build that fails leaves the traced potential
            return Backend.TRACE, traced
        if median_seconds(lambda: compiled(point)) < trace_seconds:
            return Backend.COMPILE, compiled
        return Backend.TRACE, traced

    def _evaluator(self, backend: Backend, probe: torch.Tensor) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
        if backend in (Backend.NUMBA, Backend.NUMPY) and self.temperature != UNTEMPERED:
            raise Unsupported(f"the {backend.value} kernel evaluates the untempered potential, not temperature "
                              f"{self.temperature:g}")
        if backend is Backend.NUMBA:
            return NumbaLogDensity(self)
        if backend is Backend.NUMPY:
            return NumpyLogDensity(self)
        if backend is Backend.COMPILE:
            return compiled_evaluator(self.log_density)
        if backend is Backend.TRACE:
            with torch_jit_deprecation_ignored(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
                with pyro.validation_enabled(False):
                    traced = torch.jit.trace(self.log_density, (probe.clone().requires_grad_(),), check_trace=False)
            return torch_evaluator(traced)
        return torch_evaluator(self.log_density)


def torch_evaluator(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """``z -> (value, gradient)`` in numpy float64 around a torch log density, by autograd."""

    def value_and_grad(z: np.ndarray) -> tuple[float, np.ndarray]:
        point = torch.from_numpy(z).requires_grad_()
        with pyro.validation_enabled(False):  # argument checks cannot be compiled, and cost time
            value = function(point)
        (gradient,) = torch.autograd.grad(value, point)
        return value.item(), gradient.numpy()

    return value_and_grad


def compiled_evaluator(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    r"""``z -> (value, gradient)`` in numpy float64 of one ``torch.compile`` graph for :math:`(\log\pi(z),
    \nabla_z\log\pi(z))` (:func:`torch.func.grad_and_value`: the backward fused with the forward, no autograd tape per
    call); compiled at the first call, again in a thread of another torch thread count (a guard of torch.compile's)."""
    compiled = torch.compile(torch.func.grad_and_value(function), fullgraph=True, dynamic=False)

    def value_and_grad(z: np.ndarray) -> tuple[float, np.ndarray]:
        with pyro.validation_enabled(False):
            gradient, value = compiled(torch.from_numpy(z))
        return value.item(), gradient.numpy()

    return value_and_grad


class TracePotential(FlatLayout):
    r""":math:`\log\pi(z) = -U(z)` of Pyro's trace-based potential, for the program of any model.

    Slower than :class:`FlatPotential` (every call runs the program under Pyro's handlers), but
    right for every Pyro program, including sites the model object does not describe.

    Parameters
    ----------
    potential_fn : callable
        Pyro's :math:`U`, from unconstrained site values (``pyro.infer.mcmc.util.initialize_model``).
    transforms : dict
        Pyro's transforms, constrained -> unconstrained, by site.
    params : dict of str to torch.Tensor
        A point of unconstrained site values: its keys, shapes and dtype lay out :math:`z`.
    """

    backend = Backend.EAGER

    def __init__(self, potential_fn: Callable, transforms: dict, params: dict[str, torch.Tensor]) -> None:
        super().__init__({name: value.shape for name, value in params.items()},
                         {name: transform.inv for name, transform in transforms.items()})
        self.potential_fn = potential_fn
        self.dtype = next(iter(params.values())).dtype
        self._value_and_grad = torch_evaluator(self.log_density)

    def log_density(self, z: torch.Tensor) -> torch.Tensor:
        r""":math:`-U(z)` for one point ``z`` of shape ``(dim,)``, evaluated in the model's dtype."""
        return -self.potential_fn(self.unconstrained(z.to(self.dtype)))


def latent_sites(trace) -> dict[str, dict]:
    """The latent sample sites of a Pyro trace (neither observed nor a plate's subsample), in program order."""
    return {name: site for name, site in trace.nodes.items()
            if site["type"] == "sample" and not site["is_observed"] and not site_is_subsample(site)}


def _base_support(constraint) -> str:
    while isinstance(constraint, constraints.independent):
        constraint = constraint.base_constraint
    return repr(constraint)


def flat_potential_mismatch(model, x: torch.Tensor, y: torch.Tensor, *, points: int = MISMATCH_POINTS) -> str | None:
    r"""Why :class:`FlatPotential` does not describe the Pyro program of ``model``, or ``None`` when it does.

    It does when the program's latent sites have the names and shapes of ``model.latent_shapes``
    and the supports the flat potential assumes (real for the weights, the likelihood latents'
    priors' otherwise), and when at ``points`` random points :math:`z_k`

    .. math::

        \max_k c_k - \min_k c_k \le \sqrt{\varepsilon}\,\big(1 + \max_k |\log\pi(z_k)|\big),
        \qquad c_k = \log\pi(z_k) + U(z_k),

    with :math:`U` Pyro's trace-based potential and :math:`\varepsilon` the machine precision of the
    model's dtype: the two log densities differ by one constant, so give the same posterior.
    A model whose program adds a site, drops one or changes a density fails one of the tests.
    """
    try:
        flat = FlatPotential(model, x, y, backend=Backend.EAGER)
    except Exception as error:  # noqa: BLE001 - a model the flat potential cannot read is a mismatch to report
        return f"the flat potential cannot read the model ({type(error).__name__}: {error})"
    params, potential_fn, _, trace = initialize_model(model, (x, y), max_plate_nesting=MAX_PLATE_NESTING)
    sites = latent_sites(trace)
    program = {name: tuple(site["value"].shape) for name, site in sites.items()}
    described = {name: tuple(shape) for name, shape in flat.shapes.items()}
    if program != described:
        return f"the program's latent sites {program} are not the model's {described}"
    for name, site in sites.items():
        assumed = flat._latent_priors[name].support if name in flat._latent_priors else constraints.real
        if _base_support(site["fn"].support) != _base_support(assumed):
            return f"site {name!r} has support {site['fn'].support}, the flat potential assumes {assumed}"
    dtype = next(iter(params.values())).dtype
    generator = torch.Generator().manual_seed(0)
    offsets, largest = [], 0.0
    with torch.no_grad():
        for _ in range(points):
            z = torch.randn(flat.dim, generator=generator, dtype=torch.float64)
            value = flat.log_density(z).item()
            offsets.append(value + potential_fn({k: v.to(dtype) for k, v in flat.unconstrained(z).items()}).item())
            largest = max(largest, abs(value))
    spread = max(offsets) - min(offsets)
    if not spread <= math.sqrt(torch.finfo(dtype).eps) * (1.0 + largest):  # a NaN is a mismatch too
        return f"its log density differs from the program's by {spread:.3g} between random points, not by a constant"
    return None
