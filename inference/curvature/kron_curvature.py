r"""The Kronecker-factored GGN (KFAC) of the negative log-likelihood, one pair of factors per layer.

For a layer written with :func:`bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` (a module's ``nn.Linear``
and ``nn.Conv2d`` layers are routed through them: :mod:`bnn.inference.curvature.module_layers`), with inputs
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

Both factors are sums over the rows, accumulated over chunks of rows in one pass (:func:`kron_factors`), so memory
grows with the chunk and the layers, not with the rows. curvlinops' ``KFACLinearOperator`` computes the same factors
(to round-off) more slowly on the collection's MLPs and CNN and not for 1-D convolutions, so it is the tests' oracle
(with laplace-torch), not the code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from bnn.guides.flat_weights import split_flat
from bnn.guides.kron_covariance import KronBlock, KronCovariance
from bnn.inference.curvature.module_layers import routed_through_layers, unrouted_message
from bnn.inference.curvature.output_curvature import JACOBIAN_BUDGET_BYTES, output_hessian
from bnn.models.layers import RecordedLayer, layers_of_sites, recording, sites_outside_layers
from bnn.models.priors import GaussianPrior
from bnn.models.torch_module import TorchModuleNetwork


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
    :func:`~bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` call of the site's group (a module's
    ``nn.Linear`` and ``nn.Conv2d`` layers are routed there, :mod:`bnn.inference.curvature.module_layers`), and every
    prior is Gaussian (one precision per site, added to the factors' eigenvalue products)."""
    with routed_through_layers(model):
        missing = sites_outside_layers(model, x)
    if missing and isinstance(model, TorchModuleNetwork):
        raise ValueError(unrouted_message(model, missing[0]))
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


@contextlib.contextmanager
def _recorded(model) -> Iterator[dict[str, RecordedLayer]]:
    """:func:`~bnn.models.layers.recording`, gradients on, a module's layers routed into it."""
    with torch.enable_grad(), recording() as layers, routed_through_layers(model):
        yield layers


def _hessian_root(hessian: torch.Tensor) -> torch.Tensor:
    r""":math:`L_i` with :math:`L_i L_i^\top = H_i` for each ``(n, K, K)`` output Hessian, by its eigendecomposition
    (eigenvalues a rounding below zero taken as zero)."""
    values, vectors = torch.linalg.eigh(hessian)
    return vectors * values.clamp(min=0).sqrt().unsqueeze(-2)


def _chunk_factors(model, x: torch.Tensor, values, latents) -> tuple[list[str], list[torch.Tensor], list[torch.Tensor],
                                                                      list[int]]:
    r"""Unnormalised :math:`\sum a a^\top` and :math:`\sum g^\top H g` of ``x``'s rows, and :math:`T` per layer.

    With :math:`H_i = L_i L_i^\top` (:func:`_hessian_root`), :math:`\sum_{i,t} g_{it}^\top H_i g_{it} = \sum_c
    \sum_{i,t} u_{cit} u_{cit}^\top` where :math:`u_{cit} = g_{it}^\top L_{i,:c}` is the gradient of
    :math:`\sum_i f_i^\top L_{i,:c}` at the layer's output: one backward pass per output :math:`c`, and one matrix
    product over the rows and positions, accumulated (curvlinops' type-2 KFAC)."""
    with _recorded(model) as layers:
        output = model.forward(x, values)
    names = layers_of_sites(model, layers, values)
    recorded = [layers[name] for name in names]
    root = _hessian_root(output_hessian(model.likelihood, output.detach(), latents))
    inputs = [layer.inputs.flatten(0, 1).T @ layer.inputs.flatten(0, 1) for layer in recorded]
    gradients = [0.0] * len(recorded)
    outputs = output.shape[-1]
    for column in range(outputs):
        pulled = torch.autograd.grad((output * root[..., column]).sum(), [layer.tap for layer in recorded],
                                     retain_graph=column < outputs - 1)
        for index, (layer, gradient) in enumerate(zip(recorded, pulled)):
            rows = layer.output_gradients(gradient).flatten(0, 1)  # (n T, d_out)
            gradients[index] = gradients[index] + rows.T @ rows
    return names, inputs, gradients, [layer.inputs.shape[1] for layer in recorded]


def _rows_per_chunk(model, x: torch.Tensor, values) -> int:
    """Rows whose recorded inputs, outputs and output gradients fit :data:`JACOBIAN_BUDGET_BYTES`."""
    with _recorded(model) as layers:
        model.forward(x[:1], values)
    # per row: the recorded inputs; the tap, the layer's output, the tapped output and its gradient
    per_row = sum(layer.inputs.numel() + 4 * layer.tap.numel() for layer in layers.values()) * x.element_size()
    return max(1, JACOBIAN_BUDGET_BYTES // max(per_row, 1))


def kron_factors(model, x: torch.Tensor, theta: torch.Tensor, latents: dict[str, torch.Tensor]) -> list[KronFactors]:
    r"""The factors :math:`A` and :math:`G` (module notes) of every layer at the flat weights ``theta`` ``(D,)``, in
    the order of the model's sites (check :func:`check_kron_supported` first), summed over chunks of rows
    (:func:`_rows_per_chunk`) in one pass."""
    values = split_flat(model.sites, theta.detach())
    rows = _rows_per_chunk(model, x, values)
    inputs = gradients = None
    for begin in range(0, x.shape[0], rows):
        names, chunk_inputs, chunk_gradients, positions = _chunk_factors(model, x[begin : begin + rows], values, latents)
        inputs = chunk_inputs if inputs is None else [a + b for a, b in zip(inputs, chunk_inputs)]
        gradients = chunk_gradients if gradients is None else [a + b for a, b in zip(gradients, chunk_gradients)]
    return [KronFactors(f"{name}.weight", f"{name}.bias", (a / (x.shape[0] * count)).contiguous(), g.contiguous())
            for name, a, g, count in zip(names, inputs, gradients, positions)]


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
