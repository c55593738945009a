r"""The Laplace posterior as a Pyro guide: one Gaussian draw of the flat weight vector.

With :math:`\theta \in \mathbb{R}^D` the model's weights as one vector (see
:mod:`bnn.guides.flat_weights`), the Laplace approximation is

.. math::

    q(\theta) = \mathcal{N}\big(\theta_{MAP},\ \Lambda^{-1}\big),\qquad
    \Lambda = -\nabla^2_\theta \log p(\mathcal{D}, \theta)\big|_{\theta_{MAP}} \ \text{(or its GGN)}.

Only :math:`D_c` entries may be random, the rest staying at :math:`\theta_{MAP}`: the trailing ones
(``covered_from = D - D_c``), the whole vector for the ``full`` and ``diag`` structures, the last layer's weights
and bias for ``last-layer``; or those at given ``indices`` for ``subnetwork``
(:mod:`bnn.inference.laplace.subnetwork`). The covariance is given by a
factor :math:`S` with :math:`\Lambda_c^{-1} = S S^\top`: a lower-triangular matrix, a
vector of standard deviations for a diagonal :math:`\Lambda_c`, or a
:class:`~bnn.guides.kron_covariance.KronCovariance` for a precision Kronecker-factored per layer.

The guide has the model's signature and draws, in one auxiliary sample site, the covered
vector, then puts each weight site (and each likelihood latent held fixed, such as a noise
``sigma`` set at the MAP fit) on a ``Delta`` site, so
``pyro.infer.Predictive(model, guide=guide, num_samples=S, parallel=True)`` works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyro
import pyro.distributions as dist
import torch
from bnn.guides.flat_weights import num_weights, split_flat
from bnn.guides.kron_covariance import KronCovariance, KronTransform
from bnn.models.sites import WeightSite
from torch.distributions import constraints
from torch.distributions.transforms import Transform

LATENT_SITE = "_laplace_latent"


class TriangularTransform(Transform):
    r"""The affine map :math:`z \mapsto \mu + S z` from standard normals ``(..., D)`` to :math:`\mathcal{N}(\mu, SS^\top)`,
    :math:`S` lower triangular with a positive diagonal.

    The draws are one matrix product ``z @ S.T`` over every batch dimension; ``MultivariateNormal(scale_tril=S)``
    under a plate of draws multiplies the factor broadcast to each draw instead, which copies it per draw.
    """

    domain = constraints.independent(constraints.real, 1)
    codomain = constraints.independent(constraints.real, 1)
    bijective = True

    def __init__(self, loc: torch.Tensor, scale_tril: torch.Tensor) -> None:
        super().__init__(cache_size=1)
        self.loc, self.scale_tril = loc, scale_tril

    def _call(self, standard: torch.Tensor) -> torch.Tensor:
        return self.loc + standard @ self.scale_tril.T

    def _inverse(self, value: torch.Tensor) -> torch.Tensor:
        centred = (value - self.loc).reshape(-1, self.loc.shape[-1]).T
        return torch.linalg.solve_triangular(self.scale_tril, centred, upper=False).T.reshape(value.shape)

    def log_abs_det_jacobian(self, standard: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        r""":math:`\log|\det S| = \sum_i \log S_{ii}`, the same for every draw."""
        return standard.new_full(standard.shape[:-1], float(self.scale_tril.diagonal().log().sum()))


def _check_indices(indices: torch.Tensor, total: int, covered_from: int) -> None:
    """Refuse subnetwork ``indices`` that are not increasing integer positions in ``0..total - 1``, or that come with a
    ``covered_from``."""
    if covered_from != 0:
        raise ValueError(f"indices and covered_from={covered_from} both choose the covered weights; pass one of them")
    if indices.dtype != torch.long or indices.dim() != 1 or indices.numel() == 0:
        raise ValueError(f"indices must be a non-empty 1-D long tensor, got dtype {indices.dtype}, shape "
                         f"{tuple(indices.shape)}")
    if bool((indices.diff() <= 0).any()) or int(indices[0]) < 0 or int(indices[-1]) >= total:
        raise ValueError(f"indices must be increasing positions in 0..{total - 1}")


class LaplaceGuide:
    r"""Draws :math:`\theta \sim \mathcal{N}(\theta_{MAP}, \Lambda^{-1})` and splits it into the model's sites.

    Parameters
    ----------
    sites : sequence of WeightSite
        The model's weight sites (``model.sites``), in order.
    mean : torch.Tensor
        :math:`\theta_{MAP}`, shape ``(D,)``.
    scale : torch.Tensor or KronCovariance
        The covariance factor of the covered entries: ``(D_c, D_c)`` lower triangular,
        ``(D_c,)`` standard deviations, or the per-layer Kronecker factors.
    covered_from : int
        Index of the first random entry of :math:`\theta`; 0 makes every weight random.
    indices : torch.Tensor, optional
        Instead, the positions in :math:`\theta` of the random entries, increasing (a subnetwork); ``covered_from``
        is then 0.
    constants : mapping of str to torch.Tensor, optional
        Latent sites of the likelihood held at a fixed value (``{"sigma": ...}``).
    """

    def __init__(
        self,
        sites: Sequence[WeightSite],
        mean: torch.Tensor,
        scale: torch.Tensor | KronCovariance,
        *,
        covered_from: int = 0,
        indices: torch.Tensor | None = None,
        constants: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        total = num_weights(sites)
        if mean.shape != (total,):
            raise ValueError(f"mean must have shape ({total},) for these sites, got {tuple(mean.shape)}")
        if not 0 <= covered_from < total:
            raise ValueError(f"covered_from must lie in 0..{total - 1}, got {covered_from}")
        if indices is not None:
            _check_indices(indices, total, covered_from)
        covered = total - covered_from if indices is None else indices.numel()
        if isinstance(scale, KronCovariance):
            if scale.size != covered:
                raise ValueError(f"the Kronecker-factored scale covers {scale.size} weights, not the {covered} covered")
        elif scale.shape not in {(covered,), (covered, covered)}:
            raise ValueError(
                f"scale must have shape ({covered},) or ({covered}, {covered}) for {covered} covered weights, "
                f"got {tuple(scale.shape)}"
            )
        self.sites = tuple(sites)
        self.mean = mean.detach()
        self.scale = scale if isinstance(scale, KronCovariance) else scale.detach()
        self.covered_from = covered_from
        self.indices = indices
        self.constants = {name: torch.as_tensor(value).detach() for name, value in (constants or {}).items()}

    @property
    def is_diagonal(self) -> bool:
        """Whether the covered covariance is diagonal (``scale`` holds standard deviations)."""
        return not self.is_kron and self.scale.dim() == 1

    @property
    def is_kron(self) -> bool:
        """Whether the covered precision is Kronecker-factored per layer (``scale`` a :class:`KronCovariance`)."""
        return isinstance(self.scale, KronCovariance)

    @property
    def cover(self) -> slice | torch.Tensor:
        """The covered positions of :math:`\\theta`, to index its last dimension with: ``indices``, or the slice from
        ``covered_from`` on."""
        return slice(self.covered_from, None) if self.indices is None else self.indices

    def covered_part(self, flat: torch.Tensor) -> torch.Tensor:
        """The covered entries of ``flat`` ``(..., D)`` (weights, or a Jacobian's columns), shape ``(..., D_c)``."""
        return flat[..., self.cover]

    def covered_distribution(self) -> dist.Distribution:
        """:math:`\\mathcal{N}(\\theta_{MAP,c}, S S^\\top)` over the covered entries, event shape ``(D_c,)``."""
        loc = self.covered_part(self.mean)
        if self.is_kron:
            standard = dist.Normal(torch.zeros_like(loc), torch.ones_like(loc)).to_event(1)
            return dist.TransformedDistribution(standard, KronTransform(loc, self.scale))
        if self.is_diagonal:
            return dist.Normal(loc, self.scale).to_event(1)
        standard = dist.Normal(torch.zeros_like(loc), torch.ones_like(loc)).to_event(1)
        return dist.TransformedDistribution(standard, TriangularTransform(loc, self.scale))

    def covariance(self) -> torch.Tensor:
        """:math:`\\Lambda_c^{-1} = S S^\\top`, shape ``(D_c, D_c)``."""
        if self.is_kron:
            return self.scale.dense()
        return torch.diag(self.scale**2) if self.is_diagonal else self.scale @ self.scale.T

    def times_scale(self, jacobian: torch.Tensor) -> torch.Tensor:
        r""":math:`J S` for ``jacobian`` of shape ``(..., D_c)``, so that :math:`J \Lambda_c^{-1} J^\top = (JS)(JS)^\top`."""
        if self.is_kron:
            return self.scale.transposed_times(jacobian)
        return jacobian * self.scale if self.is_diagonal else jacobian @ self.scale

    def __call__(self, x: torch.Tensor | None = None, y: torch.Tensor | None = None, num_data: int | None = None):
        """Sample every latent site of the model; the arguments mirror the model's and are unused."""
        covered = pyro.sample(LATENT_SITE, self.covered_distribution(), infer={"is_auxiliary": True})
        flat = self.mean.expand(*covered.shape[:-1], self.mean.shape[0]).clone()
        flat[..., self.cover] = covered
        values = split_flat(self.sites, flat)
        for site in self.sites:
            values[site.name] = pyro.sample(site.name, dist.Delta(values[site.name], event_dim=len(site.shape)))
        for name, value in self.constants.items():
            values[name] = pyro.sample(name, dist.Delta(value, event_dim=value.dim()))
        return values

    # ------------------------------------------------------------ save/load
    def state(self) -> dict[str, object]:
        """Tensors and plain values that :meth:`from_state` rebuilds the guide from (``torch.save``-able)."""
        scale = self.scale.state() if self.is_kron else self.scale
        return {"mean": self.mean, "scale": scale, "covered_from": self.covered_from, "indices": self.indices,
                "constants": self.constants}

    @classmethod
    def from_state(cls, sites: Sequence[WeightSite], state: Mapping[str, object]) -> LaplaceGuide:
        """Inverse of :meth:`state` for a model with weight sites ``sites``."""
        scale = state["scale"]
        scale = KronCovariance.from_state(scale) if isinstance(scale, Mapping) else scale
        return cls(sites, state["mean"], scale, covered_from=state["covered_from"], indices=state.get("indices"),
                   constants=state["constants"])

    def __repr__(self) -> str:
        kind = "Kronecker-factored" if self.is_kron else "diagonal" if self.is_diagonal else "full"
        covered = self.covered_part(self.mean).shape[0]
        return f"LaplaceGuide({kind} Gaussian over {covered} of {self.mean.shape[0]} weights)"
