r"""The stiffest curvature of the log posterior at a point: what bounds a stable gradient step there.

A gradient step :math:`z \leftarrow z + h\,\nabla\log\pi(z)` on a posterior whose negative log density has Hessian
:math:`H` near :math:`z` multiplies the deviation along each eigenvector of :math:`H` by :math:`1 - h\lambda`: it is
stable only for :math:`h\lambda_{max} < 2` (SGLD's :math:`\epsilon/2` step: :math:`\epsilon\lambda_{max} < 4`). On a
BNN :math:`\lambda_{max}` grows with the data size :math:`N` and with the noise precision :math:`1/\sigma^2`, so a fixed step
size that suits one data set overflows on a larger or less noisy one; a step set as a share of
:math:`1/\lambda_{max}` carries from one to the other.

:math:`\lambda_{max}` is found by power iteration on Hessian-vector products of the log joint (two backward passes
each, the Hessian never formed), one vector per chain. On :math:`N` rows up to :data:`CURVATURE_ROWS` that is the
full-data log joint; on more, the log joint estimated on one random subset :math:`S` of :data:`CURVATURE_ROWS` rows,
its likelihood scaled by :math:`N/|S|` (:meth:`~bnn.inference.sgmcmc.potential.MinibatchLogJoint.log_joint` on a
batch), whose Hessian is an unbiased estimate of the full data's, so the cost and the memory of the estimate stop
growing with the rows. Its top eigenvalue is a convex function of the Hessian and so, by Jensen, at least the full
data's in expectation: an error that shortens the step set from it. The chains of
:class:`~bnn.inference.sgmcmc.potential.MinibatchLogJoint` do not interact, so its Hessian is block-diagonal and
each chain's block gets its own estimate. The iteration converges to the eigenvalue of largest magnitude; at a mode
(where the Hessian is positive semi-definite up to a kink) that is :math:`\lambda_{max}`. Its Rayleigh quotient
approaches from below, within a few percent after the default iterations on the collection's networks (the
curvature tests check it against the eigenvalues of the exact Hessian).
"""

from __future__ import annotations

import torch
from bnn.inference.sgmcmc.potential import MinibatchLogJoint

POWER_ITERATIONS = 50
CURVATURE_ROWS = 8192
r"""The most rows the Hessian is estimated on (module notes): three random subsets of this many of MNIST-1D-40k's
rows put its CNN's :math:`\lambda_{max}` at a MAP within 10% of the full data's, in a tenth of the time
(benchmarks/results/training_cost.md)."""


def curvature_batches(num_data: int, num_chains: int) -> torch.Tensor | None:
    """The rows the curvature is estimated on, as every chain's batch ``(num_chains, CURVATURE_ROWS)``: ``None`` (all
    of them) for ``num_data`` up to :data:`CURVATURE_ROWS`, else one random subset (the global torch generator)."""
    if num_data <= CURVATURE_ROWS:
        return None
    return torch.randperm(num_data)[:CURVATURE_ROWS].expand(num_chains, -1)


def stiffest_curvature(log_joint: MinibatchLogJoint, z: torch.Tensor, iterations: int = POWER_ITERATIONS) -> torch.Tensor:
    r""":math:`|\lambda|_{max}` of :math:`-\nabla^2\log\pi(z)` for each chain of ``z`` ``(C, D)``: ``(C,)``, on all the
    data or, on more than :data:`CURVATURE_ROWS` rows, on a random subset of them (:func:`curvature_batches`).

    The subset and the start vector are drawn from the global torch generator (seed it for the same numbers)."""
    batches = curvature_batches(log_joint.num_data, z.shape[0])
    z = z.detach().requires_grad_()
    with torch.enable_grad():
        (gradient,) = torch.autograd.grad(log_joint.log_joint(z, batches).sum(), z, create_graph=True)
    vector = torch.randn(z.shape, dtype=z.dtype)
    vector = vector / vector.norm(dim=-1, keepdim=True)
    estimate = torch.zeros(z.shape[0], dtype=z.dtype)
    for _ in range(iterations):
        (product,) = torch.autograd.grad(gradient, z, grad_outputs=vector, retain_graph=True)
        product = -product.detach()
        estimate = (vector * product).sum(-1).abs()
        norm = product.norm(dim=-1, keepdim=True)
        if (norm == 0).any():
            raise ValueError("the log joint is flat along a power-iteration vector: its curvature there is zero")
        vector = product / norm
    return estimate
