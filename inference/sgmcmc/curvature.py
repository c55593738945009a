r"""The stiffest curvature of the log posterior at a point: what bounds a stable gradient step there.

A gradient step :math:`z \leftarrow z + h\,\nabla\log\pi(z)` on a posterior whose negative log density has Hessian
:math:`H` near :math:`z` multiplies the deviation along each eigenvector of :math:`H` by :math:`1 - h\lambda`: it is
stable only for :math:`h\lambda_{max} < 2` (SGLD's :math:`\epsilon/2` step: :math:`\epsilon\lambda_{max} < 4`). On a
BNN :math:`\lambda_{max}` grows with the data size :math:`N` and with the noise precision :math:`1/\sigma^2`, so a fixed step
size that suits one data set overflows on a larger or less noisy one; a step set as a share of
:math:`1/\lambda_{max}` carries from one to the other.

:math:`\lambda_{max}` is found by power iteration on Hessian-vector products of the full-data log joint (two
backward passes each, the Hessian never formed), one vector per chain: the chains of
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


def stiffest_curvature(log_joint: MinibatchLogJoint, z: torch.Tensor, iterations: int = POWER_ITERATIONS) -> torch.Tensor:
    r""":math:`|\lambda|_{max}` of :math:`-\nabla^2\log\pi(z)` on all the data, for each chain of ``z`` ``(C, D)``: ``(C,)``.

    The start vector is drawn from the global torch generator (seed it for the same numbers)."""
    z = z.detach().requires_grad_()
    with torch.enable_grad():
        (gradient,) = torch.autograd.grad(log_joint.log_joint(z, None).sum(), z, create_graph=True)
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
