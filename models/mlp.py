r"""The Bayesian multilayer perceptron, a plain Pyro program.

For layers :math:`l = 0, \dots, L-1` with weights :math:`W_l \in \mathbb{R}^{d_{l+1} \times d_l}`
and biases :math:`b_l \in \mathbb{R}^{d_{l+1}}`,

.. math::

    h_0 = x, \qquad h_{l+1} = \phi(h_l W_l^\top + b_l), \qquad f(x; W) = h_{L-1} W_{L-1}^\top + b_{L-1},

    W_l \sim p_l(W_l), \quad b_l \sim p_l(b_l), \qquad
    y_i \mid x_i, W \sim p(y_i \mid f(x_i; W)) \quad (i = 1, \dots, N).

Sample sites, in this order (the names are stable and part of the API):

============================  =====================================================
``layers.{l}.weight``         shape ``(d_{l+1}, d_l)``, the ``nn.Linear`` layout
``layers.{l}.bias``           shape ``(d_{l+1},)``
``sigma``                     only for a Gaussian likelihood with learned noise
``obs``                       the observations, under the plate ``data`` (dim -1)
============================  =====================================================

The network is written with batched ``matmul``: every weight may carry leading sample
dimensions, so ``Trace_ELBO(vectorize_particles=True)``, ``Predictive(parallel=True)``
and vectorised log-likelihoods work (``PyroModule[nn.Linear]`` breaks all three).
The Pyro program, the priors per site and saving come from :class:`~bnn.models.network.BayesianNetwork`, the model
interface every inference method works through; the MLP adds its sites, :meth:`BayesianMLP.forward` and
:meth:`BayesianMLP.dense_layers` (the chain of dense layers that the compiled NUTS kernels write out by hand, and
where MC dropout drops every layer's inputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from bnn.models.activations import ACTIVATIONS
from bnn.models.architecture_flags import CommandLine, Flag, hidden_flag
from bnn.models.layers import linear
from bnn.models.likelihoods import Likelihood
from bnn.models.network import ARCHITECTURES, BayesianNetwork, DenseLayers
from bnn.models.priors import Prior
from bnn.models.sites import WeightSite


def layer_sites(widths: Sequence[int], group: str = "layers", first_layer: int = 0) -> tuple[WeightSite, ...]:
    """The sites ``{group}.{l}.weight`` ``(d_{l+1}, d_l)`` and ``{group}.{l}.bias`` of dense layers of ``widths``."""
    return tuple(
        WeightSite(f"{group}.{first_layer + index}.{kind}", first_layer + index, torch.Size(shape), fan_in)
        for index, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:]))
        for kind, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,)))
    )


@ARCHITECTURES.register("mlp")
class BayesianMLP(BayesianNetwork):
    r"""A fully connected Bayesian network with a prior on every weight and bias.

    Parameters
    ----------
    in_features : int
        Number of inputs :math:`d_0`.
    out_features : int
        Number of outputs: 1 for regression or binary, K for K-class classification.
    hidden : sequence of int
        Widths of the hidden layers; ``()`` gives a Bayesian generalised linear model.
    activation : str
        Hidden activation, a name in :data:`bnn.models.activations.ACTIVATIONS`.
    prior : Prior, str or mapping
        One prior for every site, or a mapping whose keys are site names
        (``"layers.1.weight"``), layer names (``"layers.1"``) or ``"*"`` (every other
        site); the most specific key wins (:class:`~bnn.models.network.BayesianNetwork`).
        Change it later with ``model.prior = ...``.
    likelihood : Likelihood or str
        The observation model, see :mod:`bnn.models.likelihoods`.

    Examples
    --------
    >>> model = BayesianMLP(1, 1, hidden=(50,), prior=GaussianPrior(1.0))   # doctest: +SKIP
    >>> model.prior = "laplace"                                               # doctest: +SKIP
    >>> pyro.poutine.trace(model).get_trace(x, y).nodes["layers.0.weight"]  # doctest: +SKIP
    """

    command_line = CommandLine("a fully connected network (BayesianMLP)", (
        hidden_flag((50,), "hidden layer"),
        Flag("activation", "tanh", "the hidden activation", choices=ACTIVATIONS),
    ))

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        hidden: Sequence[int] = (50,),
        activation: str = "tanh",
        prior: Prior | str | Mapping[str, Any] = "gaussian",
        likelihood: Likelihood | str | Mapping[str, Any] = "gaussian",
    ) -> None:
        hidden = tuple(hidden)
        for what, value in [("in_features", in_features), ("out_features", out_features)] + [
            ("hidden width", h) for h in hidden
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive integer, got {value!r}")
        widths = (in_features, *hidden, out_features)
        largest = max(a * b for a, b in zip(widths, widths[1:]))
        if largest >= 2**63:  # torch indexes tensors with int64: such a weight matrix cannot exist
            raise ValueError(f"a weight matrix of these widths would hold {largest} weights, more than a tensor can index "
                             "(2^63 - 1); use smaller hidden widths")
        self.in_features = in_features
        self.out_features = out_features
        self.hidden = hidden
        self.activation = activation
        self._activation_fn = ACTIVATIONS.get(activation)
        super().__init__(in_features, out_features, self._weight_sites(), prior=prior, likelihood=likelihood)

    def _weight_sites(self) -> tuple[WeightSite, ...]:
        """The weight sites, weight then bias of each layer from the inputs to the outputs."""
        return layer_sites((self.in_features, *self.hidden, self.out_features))

    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Network output :math:`f(x; W)` of shape ``(*sample, n, out_features)``.

        ``weights`` maps each site name to a tensor of shape ``(*sample, *site.shape)``.
        """
        if x.dim() != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape (n, {self.in_features}), got {tuple(x.shape)}")
        h = x
        last = self.sites[-1].layer
        for weight_site, bias_site in zip(self.sites[::2], self.sites[1::2]):
            weight, bias = weights[weight_site.name], weights[bias_site.name]
            if weight.shape[weight.dim() - 2 :] != weight_site.shape or bias.shape[bias.dim() - 1 :] != bias_site.shape:
                raise ValueError(
                    f"layer {weight_site.layer} needs weight (..., {tuple(weight_site.shape)}) and bias "
                    f"(..., {tuple(bias_site.shape)}), got {tuple(weight.shape)} and {tuple(bias.shape)}"
                )
            h = linear(h, weight, bias, name=weight_site.group)
            if weight_site.layer != last:
                h = self._activation_fn(h)
        return h

    def activation_widths(self) -> tuple[int, ...]:
        """The inputs, every hidden layer and the outputs: ``(in_features, *hidden, out_features)``."""
        return (self.in_features, *self.hidden, self.out_features)

    def dense_layers(self) -> DenseLayers | None:
        """Its layers and activation; ``None`` for a subclass that rewrites :meth:`forward` (it is no longer this
        chain)."""
        if type(self).forward is not BayesianMLP.forward:
            return None
        return DenseLayers(tuple(zip(self.sites[::2], self.sites[1::2])), self.activation)

    def arguments(self) -> dict[str, Any]:
        return {"in_features": self.in_features, "out_features": self.out_features, "hidden": list(self.hidden),
                "activation": self.activation}

    def __repr__(self) -> str:
        widths = "-".join(map(str, (self.in_features, *self.hidden, self.out_features)))
        priors = ", ".join(f"{k}: {type(p).__name__}" for k, p in self._prior_table.items())
        return f"BayesianMLP({widths}, {self.activation}, prior={{{priors}}}, likelihood={type(self.likelihood).__name__})"
