r"""A NUTS chain in the whitened coordinates of the Laplace approximation at its start.

Where the data dominate the prior (many rows per weight), the posterior is close to the Gaussian
:math:`\mathcal{N}(\hat z, H^{-1})` of its Laplace approximation at the mode :math:`\hat z`, with
:math:`H = -\nabla^2 \log\pi(\hat z)`, and it is as ill-conditioned as :math:`H`: a diagonal mass matrix cannot
undo correlations, so a trajectory needs about :math:`\sqrt{\lambda_{\max}/\lambda_{\min}}` leapfrog steps of the
narrowest direction's size to cross the widest. A softmax layer shows it: adding one vector to every class's
weights leaves the likelihood unchanged, so those directions are held by the prior alone while the others are held
by every row (on a CNN's last layer over 40,000 rows the eigenvalues of :math:`H` run from 1 to about 12,000). The
chain samples instead

.. math::

    u = L^{-1}(z - \hat z), \qquad L = V\,|\Lambda|^{-1/2}, \qquad H = V \Lambda V^\top,

so that :math:`L L^\top = H^{-1}` and :math:`u` is close to :math:`\mathcal{N}(0, I)`; the potential is the same
function of :math:`z = \hat z + L u` (a linear map: a constant Jacobian), with :math:`\nabla_u \log\pi =
L^\top \nabla_z \log\pi`, and the sampler's own diagonal adaptation corrects what the approximation misses. This is
the affine case of Hoffman et al.'s neural transport (2019; Pyro's ``NeuTraReparam`` of an
``AutoLaplaceApproximation``). The draws are exact whatever :math:`L`: it only changes the geometry the sampler
moves in.

:math:`H` comes from central differences of the potential's gradient, :math:`2d` gradients, one column per pair,
symmetrised. An eigenvalue that is not positive (a start that is not a mode) enters by its magnitude, the scale of
the curvature in that direction, as Betancourt's SoftAbs metric takes it; one below :data:`EIGENVALUE_FLOOR` of the
largest is raised to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np

DIFFERENCE_STEP = 1e-4
"""The step of the central differences of the gradient, in unconstrained units."""
EIGENVALUE_FLOOR = 1e-12
"""The smallest eigenvalue magnitude of :math:`H` kept, as a share of the largest."""
ROWS_PER_LATENT = 10
"""``auto`` whitens where the data hold at least this many rows per latent: a posterior dominated by its data."""
MAX_LATENTS = 1_000
"""``auto`` whitens up to this many latents: :math:`H` costs :math:`2d` gradients and :math:`d^2` memory."""


class Whitening(str, Enum):
    """Which coordinates the nutpie engine's chains move in."""

    AUTO = "auto"
    """``laplace`` where it pays (:func:`whitens`), else ``none``."""
    LAPLACE = "laplace"
    """Each chain in the whitened coordinates of the Laplace approximation at its MAP start (module notes)."""
    NONE = "none"
    """The unconstrained coordinates themselves, with nutpie's diagonal mass matrix."""


def whitens(whitening: Whitening, rows: int, latents: int, from_map: bool, flat_potential: bool) -> bool:
    """Whether the chains of a run sample whitened: ``laplace`` always (its conditions are checked with the options),
    ``auto`` on the flat potential of chains started at their MAP, for at most :data:`MAX_LATENTS` latents and at
    least :data:`ROWS_PER_LATENT` rows per latent."""
    if whitening is Whitening.AUTO:
        return from_map and flat_potential and latents <= MAX_LATENTS and rows >= ROWS_PER_LATENT * latents
    return whitening is Whitening.LAPLACE


def negative_hessian(value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]], z: np.ndarray,
                     step: float = DIFFERENCE_STEP) -> np.ndarray:
    r""":math:`H = -\nabla^2 \log\pi(z)` by central differences of the gradient, :math:`2d` evaluations, symmetrised."""
    columns = []
    for j in range(z.shape[0]):
        shift = np.zeros_like(z)
        shift[j] = step
        columns.append((value_and_grad(z - shift)[1] - value_and_grad(z + shift)[1]) / (2 * step))
    hessian = np.stack(columns, axis=1)
    return (hessian + hessian.T) / 2


@dataclass(frozen=True)
class LaplaceWhitening:
    r"""The map :math:`z = \hat z + L u` of a chain's whitened coordinates (module notes).

    Attributes
    ----------
    centre : numpy.ndarray
        :math:`\hat z`, ``(d,)``.
    factor : numpy.ndarray
        :math:`L`, ``(d, d)``, with :math:`L L^\top = H^{-1}`.
    gradients : int
        The gradient evaluations its Hessian took.
    """

    centre: np.ndarray
    factor: np.ndarray
    gradients: int

    @classmethod
    def at(cls, value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]], centre: np.ndarray) -> LaplaceWhitening:
        """The whitening of the Laplace approximation of ``value_and_grad``'s log density at ``centre``."""
        eigenvalues, vectors = np.linalg.eigh(negative_hessian(value_and_grad, centre))
        magnitudes = np.abs(eigenvalues)
        magnitudes = np.maximum(magnitudes, EIGENVALUE_FLOOR * magnitudes.max())
        return cls(centre, vectors / np.sqrt(magnitudes), 2 * centre.shape[0])

    def point(self, u: np.ndarray) -> np.ndarray:
        r""":math:`z = \hat z + L u` of whitened points ``(..., d)``."""
        return self.centre + u @ self.factor.T

    def log_density(self, value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]]
                    ) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
        r"""``u -> (log pi(z), L^T grad_z log pi(z))`` at :math:`z = \hat z + L u`."""

        def whitened(u: np.ndarray) -> tuple[float, np.ndarray]:
            value, gradient = value_and_grad(self.point(np.asarray(u, dtype=np.float64)))
            return value, self.factor.T @ gradient

        return whitened
