r"""The Kronecker-factored GGN (KFAC) of the negative log-likelihood, one pair of factors per layer.

For a layer written with :func:`bnn.models.layers.linear` or :func:`~bnn.models.layers.conv`, with inputs
:math:`a_{it} \in \mathbb{R}^{d_{in}}` (row :math:`i`, output position :math:`t = 1, \dots, T`; :math:`T = 1` for a
linear layer, the unfolded patches of a convolution) and output Jacobians
:math:`g_{it} = \partial f_i / \partial s_{it} \in \mathbb{R}^{K \times d_{out}}` (:math:`s_{it}` the layer's output
at position :math:`t`), the GGN block of its weight :math:`\sum_i J_i^\top H_i J_i` is approximated by
(Martens and Grosse 2015; Grosse and Martens 2016, "KFAC-expand" over the positions)

.. math::

    G \otimes A,\qquad A = \frac{1}{N T} \sum_{i,t} a_{it} a_{it}^\top ,\qquad
    G = \sum_{i,t} g_{it}^\top H_i\, g_{it},

and that of its bias by :math:`G`, weight and bias apart (no cross term), with :math:`H_i` the likelihood's output
Hessian (:mod:`bnn.inference.curvature.output_curvature`). These are laplace-torch's ``KronLaplace`` factors with
its default curvlinops backend (``KFACLinearOperator``, ``kfac_approx="expand"``, ``separate_weight_and_bias=True``).
For a network that is one linear layer with one output and a Gaussian likelihood (:math:`H_i = 1/\sigma^2` for
every row) the weight and bias blocks are exact: :math:`G \otimes A = (N/\sigma^2) \cdot \frac1N \sum_i x_i
x_i^\top`, the GGN's weight block, and :math:`G = N/\sigma^2` its bias block; only the weight-bias cross block
:math:`\sum_i x_i / \sigma^2` is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from bnn.guides.flat_weights import split_flat
from bnn.guides.kron_covariance import KronBlock, KronCovariance
from bnn.inference.curvature.output_curvature import JACOBIAN_BUDGET_BYTES, output_hessian
from bnn.models.layers import layers_of_sites, recording, sites_outside_layers
from bnn.models.priors import GaussianPrior


@dataclass(frozen=True)
class KronFactors:
    """The factors :math:`A` ``(d_in, d_in)`` and :math:`G` ``(d_out, d_out)`` of one layer (module notes), and its
    sites."""

    weight_site: str
    bias_site: str
    inputs_factor: torch.Tensor
    gradients_factor: torch.Tensor


def check_kron_supported(model, x: torch.Tensor) -> None:
    """Raise ``ValueError`` unless a forward pass on ``x``'s first row records every weight site in a
    :func:`~bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` call of the site's group, and every prior is
    Gaussian (one precision per site, added to the factors' eigenvalue products)."""
    missing = sites_outside_layers(model, x)
    if missing:
        raise ValueError(f"structure='kron' needs every layer written with bnn.models.layers.linear/conv; "
                         f"{type(model).__name__}'s {missing[0]!r} is not; use 'full', 'diag' or 'last-layer'")
    others = sorted({f"{type(model.prior[site.name]).__name__} on {site.name!r}" for site in model.sites
                     if not isinstance(model.prior[site.name], GaussianPrior)})
    if others:
        raise ValueError(f"structure='kron' adds one Gaussian prior precision per weight and bias site to the factors' "
                         f"eigenvalues; the model has {others}: use a Gaussian prior, or structure 'full' or 'diag'")


def kron_supported(model, x: torch.Tensor) -> bool:
    """Whether :func:`check_kron_supported` accepts ``model`` on ``x``'s first row."""
    try:
        check_kron_supported(model, x[:1])
    except ValueError:
        return False
    return True


def _chunk_factors(model, x: torch.Tensor, values, latents) -> tuple[list[str], list[torch.Tensor], list[torch.Tensor],
                                                                      int]:
    """Unnormalised :math:`\\sum a a^\\top` and :math:`\\sum g^\\top H g` of ``x``'s rows, and :math:`T` per layer."""
    with torch.enable_grad(), recording() as layers:
        output = model.forward(x, values)
    names = layers_of_sites(model, layers, values)
    hessian = output_hessian(model.likelihood, output.detach(), latents)
    taps = [layers[name].tap for name in names]
    outputs = output.shape[-1]
    per_output = [torch.autograd.grad(output[:, k].sum(), taps, retain_graph=k < outputs - 1) for k in range(outputs)]
    inputs, gradients, positions = [], [], []
    for index, name in enumerate(names):
        layer = layers[name]
        jacobian = torch.stack([layer.output_gradients(grads[index]) for grads in per_output], dim=1)  # (n, K, T, d)
        gradients.append(torch.einsum("nktd,nkl,nlte->de", jacobian, hessian, jacobian))
        inputs.append(torch.einsum("ntd,nte->de", layer.inputs, layer.inputs))
        positions.append(layer.inputs.shape[1])
    return names, inputs, gradients, positions


def _rows_per_chunk(model, x: torch.Tensor, values) -> int:
    """Rows whose recorded inputs and output Jacobians fit :data:`JACOBIAN_BUDGET_BYTES`."""
    with torch.enable_grad(), recording() as layers:
        outputs = model.forward(x[:1], values).shape[-1]
    per_row = sum(layer.inputs.numel() + outputs * layer.tap.numel() for layer in layers.values()) * x.element_size()
    return max(1, JACOBIAN_BUDGET_BYTES // max(per_row, 1))


def kron_factors(model, x: torch.Tensor, theta: torch.Tensor, latents: dict[str, torch.Tensor]) -> list[KronFactors]:
    r"""The factors :math:`A` and :math:`G` (module notes) of every layer at the flat weights ``theta`` ``(D,)``, in
    the order of the model's sites (check :func:`check_kron_supported` first)."""
    values = split_flat(model.sites, theta.detach())
    rows = _rows_per_chunk(model, x, values)
    total = None
    for begin in range(0, x.shape[0], rows):
        names, inputs, gradients, positions = _chunk_factors(model, x[begin : begin + rows], values, latents)
        if total is None:
            total = [inputs, gradients]
        else:
            for summed, new in zip(total, (inputs, gradients)):
                for accumulated, piece in zip(summed, new):
                    accumulated += piece
    return [KronFactors(f"{name}.weight", f"{name}.bias", (a / (x.shape[0] * count)).contiguous(), g.contiguous())
            for name, a, g, count in zip(names, *total, positions)]


def kron_covariance(model, factors: list[KronFactors], site_precisions: Mapping[str, float]) -> KronCovariance:
    r"""The :class:`~bnn.guides.kron_covariance.KronCovariance` of :math:`\Lambda = G \otimes A + \delta`, with
    :math:`\delta` the prior precision of each weight and bias site (``site_precisions``), over all the weights."""
    offsets, offset = {}, 0
    for site in model.sites:
        offsets[site.name], offset = offset, offset + site.numel
    blocks = []
    for layer in factors:
        g_values, g_vectors = torch.linalg.eigh(layer.gradients_factor)
        a_values, a_vectors = torch.linalg.eigh(layer.inputs_factor)
        blocks.append(KronBlock(offsets[layer.weight_site], offsets[layer.bias_site], g_vectors, g_values.clamp(min=0),
                                a_vectors, a_values.clamp(min=0), site_precisions[layer.weight_site],
                                site_precisions[layer.bias_site]))
    return KronCovariance(blocks, offset)


def kron_posterior(model, x: torch.Tensor, theta: torch.Tensor, latents: dict[str, torch.Tensor],
                   prior_precision: torch.Tensor) -> KronCovariance:
    r"""The Kronecker-factored posterior covariance at ``theta`` with the diagonal prior precision ``prior_precision``
    ``(D,)`` (one value per site, as a Gaussian prior's)."""
    per_site = split_flat(model.sites, prior_precision)
    return kron_covariance(model, kron_factors(model, x, theta, latents),
                           {name: float(value.reshape(-1)[0]) for name, value in per_site.items()})
