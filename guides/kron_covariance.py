r"""A posterior covariance whose precision is Kronecker-factored per layer, held as eigendecompositions.

For a layer with weight :math:`W \in \mathbb{R}^{d_{out} \times d_{in}}` (flattened row-major, a convolution's
kernel folded into :math:`d_{in}`) and bias :math:`b \in \mathbb{R}^{d_{out}}`, the posterior precision has the
blocks (Ritter et al. 2018; laplace-torch's ``KronDecomposed``)

.. math::

    \Lambda_W = G \otimes A + \delta_W I, \qquad \Lambda_b = G + \delta_b I ,

with :math:`G = Q_G \operatorname{diag}(\lambda_G) Q_G^\top` and :math:`A = Q_A \operatorname{diag}(\lambda_A)
Q_A^\top`, so :math:`\Lambda_W = (Q_G \otimes Q_A) \operatorname{diag}(\lambda_G \otimes \lambda_A + \delta_W)
(Q_G \otimes Q_A)^\top`. A covariance factor :math:`S` with :math:`S S^\top = \Lambda^{-1}` acts on a matrix
:math:`Z` of the weight's shape as

.. math::

    S\,\mathrm{vec}(Z) = \mathrm{vec}\big(Q_G\,[Z \odot M]\,Q_A^\top\big),\qquad
    M_{oi} = (\lambda_{G,o}\lambda_{A,i} + \delta_W)^{-1/2},

and :math:`S^\top \mathrm{vec}(J) = \mathrm{vec}\big([Q_G^\top J Q_A] \odot M\big)`, so that
:math:`J \Lambda^{-1} J^\top = (S^\top J)^\top (S^\top J)` and
:math:`\log\det\Lambda = \sum \log(\lambda_G \otimes \lambda_A + \delta_W) + \sum \log(\lambda_G + \delta_b)`, all
without forming a :math:`D \times D` matrix. The weights of a layer and of other layers are independent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.distributions import constraints
from torch.distributions.transforms import Transform


@dataclass(frozen=True)
class KronBlock:
    r"""One layer's eigendecomposed factors and prior precisions (module notes).

    Attributes
    ----------
    weight_offset, bias_offset : int
        Where the layer's weight (row-major, ``d_out * d_in`` entries) and bias (``d_out``) start in the covered
        vector.
    g_vectors, g_values : torch.Tensor
        :math:`Q_G` ``(d_out, d_out)`` and :math:`\lambda_G` ``(d_out,)``.
    a_vectors, a_values : torch.Tensor
        :math:`Q_A` ``(d_in, d_in)`` and :math:`\lambda_A` ``(d_in,)``.
    weight_delta, bias_delta : float
        :math:`\delta_W` and :math:`\delta_b`, the prior precisions of the weight and of the bias.
    """

    weight_offset: int
    bias_offset: int
    g_vectors: torch.Tensor
    g_values: torch.Tensor
    a_vectors: torch.Tensor
    a_values: torch.Tensor
    weight_delta: float
    bias_delta: float

    @property
    def shape(self) -> tuple[int, int]:
        """``(d_out, d_in)``."""
        return self.g_values.shape[0], self.a_values.shape[0]

    def weight_scale(self) -> torch.Tensor:
        r""":math:`M`, ``(d_out, d_in)``."""
        return (torch.outer(self.g_values, self.a_values) + self.weight_delta).rsqrt()

    def bias_scale(self) -> torch.Tensor:
        r""":math:`(\lambda_G + \delta_b)^{-1/2}`, ``(d_out,)``."""
        return (self.g_values + self.bias_delta).rsqrt()

    def logdet_precision(self) -> torch.Tensor:
        return -2 * (self.weight_scale().log().sum() + self.bias_scale().log().sum())

    def slices(self) -> tuple[slice, slice]:
        rows, columns = self.shape
        return (slice(self.weight_offset, self.weight_offset + rows * columns),
                slice(self.bias_offset, self.bias_offset + rows))


class KronCovariance:
    r"""The covariance :math:`\Lambda^{-1}` of the module notes over ``size`` covered weights, one
    :class:`KronBlock` per layer; every covered weight belongs to exactly one block."""

    def __init__(self, blocks: Sequence[KronBlock], size: int) -> None:
        covered = sorted(index for block in blocks for part in block.slices() for index in range(part.start, part.stop))
        if covered != list(range(size)):
            raise ValueError(f"the Kronecker blocks must cover each of the {size} weights once, they cover "
                             f"{len(covered)} entries ({len(set(covered))} distinct)")
        self.blocks = tuple(blocks)
        self.size = size

    def logdet_precision(self) -> float:
        r""":math:`\log\det\Lambda`."""
        return float(sum(block.logdet_precision() for block in self.blocks))

    def transposed_times(self, jacobian: torch.Tensor) -> torch.Tensor:
        r""":math:`J S` for ``jacobian`` ``(..., D)``: each row mapped by :math:`S^\top` (module notes)."""
        out = torch.empty_like(jacobian)
        for block in self.blocks:
            weight, bias = block.slices()
            rows = jacobian[..., weight].unflatten(-1, block.shape)
            rotated = block.g_vectors.T @ rows @ block.a_vectors * block.weight_scale()
            out[..., weight] = rotated.flatten(-2)
            out[..., bias] = jacobian[..., bias] @ block.g_vectors * block.bias_scale()
        return out

    def times(self, standard: torch.Tensor) -> torch.Tensor:
        r""":math:`S z` for each row ``z`` of ``standard`` ``(..., D)``: standard normals to draws of
        :math:`\mathcal{N}(0, \Lambda^{-1})`."""
        out = torch.empty_like(standard)
        for block in self.blocks:
            weight, bias = block.slices()
            rows = standard[..., weight].unflatten(-1, block.shape) * block.weight_scale()
            out[..., weight] = (block.g_vectors @ rows @ block.a_vectors.T).flatten(-2)
            out[..., bias] = (standard[..., bias] * block.bias_scale()) @ block.g_vectors.T
        return out

    def inverse_times(self, draws: torch.Tensor) -> torch.Tensor:
        r""":math:`S^{-1} x` for each row ``x`` of ``draws`` ``(..., D)``, the inverse of :meth:`times`."""
        out = torch.empty_like(draws)
        for block in self.blocks:
            weight, bias = block.slices()
            rows = block.g_vectors.T @ draws[..., weight].unflatten(-1, block.shape) @ block.a_vectors
            out[..., weight] = (rows / block.weight_scale()).flatten(-2)
            out[..., bias] = draws[..., bias] @ block.g_vectors / block.bias_scale()
        return out

    def precision_diagonal(self) -> torch.Tensor:
        r"""The diagonal of :math:`\Lambda`, ``(D,)``: :math:`\sum_{pq} Q_{G,op}^2 Q_{A,iq}^2 (\lambda_{G,p}\lambda_{A,q}
        + \delta_W)` for weight :math:`(o, i)`, :math:`\sum_p Q_{G,op}^2 (\lambda_{G,p} + \delta_b)` for bias :math:`o`."""
        out = self.blocks[0].g_values.new_empty(self.size)
        for block in self.blocks:
            weight, bias = block.slices()
            g_squared, a_squared = block.g_vectors**2, block.a_vectors**2
            eigenvalues = torch.outer(block.g_values, block.a_values) + block.weight_delta
            out[weight] = (g_squared @ eigenvalues @ a_squared.T).flatten()
            out[bias] = g_squared @ (block.g_values + block.bias_delta)
        return out

    def dense(self) -> torch.Tensor:
        r""":math:`\Lambda^{-1}` as a ``(D, D)`` matrix (for checks on small networks)."""
        factor_transposed = self.times(torch.eye(self.size, dtype=self.blocks[0].g_values.dtype))  # row j: S e_j
        return factor_transposed.T @ factor_transposed

    def to(self, dtype: torch.dtype) -> KronCovariance:
        tensors = ("g_vectors", "g_values", "a_vectors", "a_values")
        return KronCovariance([KronBlock(**{**vars(block), **{k: getattr(block, k).to(dtype) for k in tensors}})
                               for block in self.blocks], self.size)

    @property
    def nbytes(self) -> int:
        return sum(getattr(block, name).nbytes for block in self.blocks
                   for name in ("g_vectors", "g_values", "a_vectors", "a_values"))

    def state(self) -> dict[str, object]:
        """Tensors and plain values (``torch.save``-able) that :meth:`from_state` rebuilds it from."""
        return {"size": self.size, "blocks": [vars(block) for block in self.blocks]}

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> KronCovariance:
        return cls([KronBlock(**block) for block in state["blocks"]], state["size"])


class KronTransform(Transform):
    r"""The affine map :math:`z \mapsto \mu + S z` from standard normals ``(..., D)`` to
    :math:`\mathcal{N}(\mu, \Lambda^{-1})`, :math:`S` that of a :class:`KronCovariance`."""

    domain = constraints.independent(constraints.real, 1)
    codomain = constraints.independent(constraints.real, 1)
    bijective = True

    def __init__(self, loc: torch.Tensor, covariance: KronCovariance) -> None:
        super().__init__(cache_size=1)
        self.loc, self.covariance = loc, covariance

    def _call(self, standard: torch.Tensor) -> torch.Tensor:
        return self.loc + self.covariance.times(standard)

    def _inverse(self, value: torch.Tensor) -> torch.Tensor:
        return self.covariance.inverse_times(value - self.loc)

    def log_abs_det_jacobian(self, standard: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        r""":math:`\log|\det S| = -\tfrac12 \log\det\Lambda`, the same for every draw."""
        return standard.new_full(standard.shape[:-1], -0.5 * self.covariance.logdet_precision())
