r"""A Bayesian network with shared hidden layers and one output head per task (multi-head continual learning).

With the shared layers :math:`h_{l+1} = \phi(h_l W_l^\top + b_l)` (:math:`h_0` the features) and head
:math:`t` of weights :math:`V_t, c_t`, an example of task :math:`t_i` has the output

.. math::

    f(x_i; W) = h_L(x_i)\, V_{t_i}^\top + c_{t_i},

so every task trains the shared layers and only its own head (Nguyen et al. 2018's multi-head setting: the
task of a test input is known). The task index travels with the input as the last column of ``x``, so a
data set that mixes tasks (joint training, a replayed coreset) needs nothing else, and every inference
method that works through :meth:`forward` and the Pyro program fits it unchanged.

Sites: ``layers.{l}.weight``/``bias`` (shared), ``heads.{t}.weight`` ``(out_features, d_L)`` and
``heads.{t}.bias`` ``(out_features,)``; a prior mapping may name a head, ``{"*": ..., "heads.2": ...}``.
It is not a chain of dense layers (:meth:`~bnn.models.network.BayesianNetwork.dense_layers` is ``None``): the methods
that write one out by hand (MC dropout, the local reparameterisation of the mean-field guide) refuse it, and NUTS
uses its torch potential.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from bnn.models.layers import linear
from bnn.models.likelihoods import Likelihood
from bnn.models.mlp import BayesianMLP, layer_sites
from bnn.models.network import ARCHITECTURES
from bnn.models.priors import Prior
from bnn.models.sites import WeightSite


def task_inputs(features: torch.Tensor, task: int) -> torch.Tensor:
    """``features`` ``(n, d)`` with the column ``task`` appended: the ``x`` that sends every row to head ``task``."""
    return torch.cat([features, torch.full((features.shape[0], 1), float(task), dtype=features.dtype)], dim=1)


@ARCHITECTURES.register("multihead")
class MultiHeadMLP(BayesianMLP):
    r"""Shared hidden layers and ``num_heads`` output heads; ``x`` carries the task index in its last column.

    Parameters
    ----------
    in_features : int
        Number of features the network reads; ``x`` has ``in_features + 1`` columns (the attribute
        ``in_features`` counts them all, as every check on ``x`` does).
    out_features : int
        Outputs of each head.
    num_heads : int
        Number of tasks, each with its own head.
    hidden, activation, prior, likelihood
        As :class:`~bnn.models.mlp.BayesianMLP`; ``hidden`` are the shared layers.

    Raises
    ------
    ValueError
        For a ``num_heads`` that is not a positive integer; in :meth:`forward`, for a task column that is not an
        integer in ``0..num_heads - 1``.
    """

    command_line = None  # its heads follow a continual benchmark's tasks, not a data set's shape

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        num_heads: int,
        hidden: Sequence[int] = (50,),
        activation: str = "tanh",
        prior: Prior | str | Mapping[str, Any] = "gaussian",
        likelihood: Likelihood | str | Mapping[str, Any] = "gaussian",
    ) -> None:
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive integer, got {in_features!r}")
        self.num_heads = num_heads
        self.num_features = in_features
        super().__init__(in_features + 1, out_features, hidden=hidden, activation=activation, prior=prior,
                         likelihood=likelihood)

    def _weight_sites(self) -> tuple[WeightSite, ...]:
        hidden = tuple(self.hidden)
        shared = layer_sites((self.num_features, *hidden))
        heads = tuple(
            WeightSite(f"heads.{task}.{kind}", len(hidden), torch.Size(shape), (self.num_features, *hidden)[-1])
            for task in range(self.num_heads)
            for kind, shape in (("weight", (self.out_features, (self.num_features, *hidden)[-1])),
                                ("bias", (self.out_features,)))
        )
        return shared + heads

    def head_mask(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, num_heads)``: 1 where the row's task (the last column of ``x``) is the head, else 0.

        Checked to be an integer in ``0..num_heads - 1`` except inside torch's function transforms (``vmap``,
        ``jacrev``: the Laplace curvature) and JIT tracing, which allow no data-dependent check (the same data were
        checked outside them first).
        """
        task = x[:, -1]
        if not (torch._C._functorch.is_functorch_wrapped_tensor(x) or torch.jit.is_tracing()):
            valid = (task == task.round()) & (task >= 0) & (task < self.num_heads)
            if not bool(valid.all()):
                raise ValueError(f"the last column of x must hold the task index, an integer in 0..{self.num_heads - 1}; "
                                 f"got values from {task.min().item():g} to {task.max().item():g}")
        return (task.unsqueeze(-1) == torch.arange(self.num_heads, dtype=task.dtype)).to(x.dtype)

    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Output ``(*sample, n, out_features)`` of each row's own head (``weights`` as in the base class)."""
        if x.dim() != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape (n, {self.in_features}): {self.num_features} features and the task "
                             f"index, got {tuple(x.shape)}")
        mask = self.head_mask(x)
        h = x[:, :-1]
        shared = self.sites[: 2 * len(self.hidden)]
        for weight_site, bias_site in zip(shared[::2], shared[1::2]):
            h = self._activation_fn(linear(h, weights[weight_site.name], weights[bias_site.name],
                                           name=weight_site.group))
        heads = torch.stack([
            linear(h, weights[f"heads.{t}.weight"], weights[f"heads.{t}.bias"], name=f"heads.{t}")
            for t in range(self.num_heads)
        ], dim=-2)  # (*sample, n, heads, out)
        return (heads * mask.unsqueeze(-1)).sum(-2)

    def arguments(self) -> dict[str, Any]:
        return {"in_features": self.num_features, "out_features": self.out_features, "num_heads": self.num_heads,
                "hidden": list(self.hidden), "activation": self.activation}

    def __repr__(self) -> str:
        widths = "-".join(map(str, (self.num_features, *self.hidden)))
        return super().__repr__().replace("BayesianMLP(", "MultiHeadMLP(", 1).replace(
            "-".join(map(str, (self.in_features, *self.hidden, self.out_features))),
            f"{widths}-{self.num_heads}x{self.out_features} + task column", 1)

