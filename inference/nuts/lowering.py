r"""A network as the chain of dense layers the compiled kernels evaluate, a torch module's (:func:`~bnn.models.from_module`)
included.

The kernels (:mod:`bnn.inference.nuts.numba_kernel`, :mod:`bnn.inference.nuts.numpy_potential`) evaluate

.. math::

    f = a_L, \qquad a_l = h_{l-1} W_l^\top + b_l, \qquad h_l = \phi(a_l), \qquad h_0 = g(x),

on the rows :math:`h_0` their potential reads (:func:`chain_inputs`). A built-in network states its chain
(:meth:`~bnn.models.network.BayesianNetwork.dense_layers`, :math:`g(x) = x`); a
:class:`~bnn.models.torch_module.TorchModuleNetwork` is lowered to one (:func:`lowered_chain`) when its Bayesian
parameters are the weights and biases of ``nn.Linear`` layers that make its output in one of two ways:

* an ``nn.Sequential`` whose children, from the first with a Bayesian parameter on, are ``nn.Linear`` layers with a
  bias, each wholly Bayesian, one activation layer between every two, the same kind with torch's default settings
  each time (:data:`ACTIVATION_LAYERS`: the activations the kernels compile), and ``nn.Identity`` or ``nn.Dropout``
  (the identity in eval mode) anywhere;
* any module whose Bayesian parameters are one ``nn.Linear``'s weight and bias, called once, whose output is the
  module's (checked on a probe batch): a last layer over a feature map of the module's own.

The module's layers before the chain hold their parameters at a point :math:`\hat\theta_P`, so their output
:math:`g(x) = g(x; \hat\theta_P)` is fixed: it is computed once, and a gradient costs the chain alone (wholly
Bayesian, :math:`g(x) = x`). Anything else (a convolution or another layer among the Bayesian ones, a forward of its
own around several Bayesian layers, a layer with a hook) is not lowered: :class:`Unsupported` says why, and NUTS
runs on a torch potential. The kernels' value and gradient are checked against the torch potential's at a probe
point before a chain uses them (:class:`~bnn.inference.nuts.potential.FlatPotential`).
"""

from __future__ import annotations

import torch
from bnn.models.network import DenseLayers
from bnn.models.torch_module import PROBE_ROWS, TorchModuleNetwork
from torch import nn

ACTIVATION_LAYERS: dict[type[nn.Module], tuple[str, dict[str, object]]] = {
    nn.Tanh: ("tanh", {}),
    nn.ReLU: ("relu", {}),
    nn.Sigmoid: ("sigmoid", {}),
    nn.Softplus: ("softplus", {"beta": 1.0, "threshold": 20.0}),
    nn.ELU: ("elu", {"alpha": 1.0}),
    nn.SiLU: ("silu", {}),
    nn.GELU: ("gelu", {"approximate": "none"}),
}
"""Activation layer -> (the kernels' activation, the settings it must have: torch's defaults)."""
PASS_THROUGH = (nn.Identity, nn.Dropout)
"""Layers that are the identity in eval mode, which a chain may hold anywhere."""
NO_ACTIVATION = "tanh"
"""The activation a chain of one layer states: it applies none, and the kernels want one they know."""


class Unsupported(NotImplementedError):
    """The model has a part (prior, likelihood, activation, transform, layer) that a compiled kernel does not cover."""


def dense_chain(model, what: str) -> DenseLayers:
    """``model``'s chain of dense layers (:meth:`~bnn.models.network.BayesianNetwork.dense_layers`, else
    :func:`lowered_chain`), its sites in the order of ``model.sites``; :class:`Unsupported` (``what`` says for what)
    when it is not one, or when a prior of it is hierarchical (the kernels read fixed priors only)."""
    if model.hierarchical_sites:
        raise Unsupported(f"{what} for fixed priors; the latent scales of hierarchical priors need a torch backend")
    chain = model.dense_layers()
    if chain is None:
        try:
            chain = lowered_chain(model)[0]
        except Unsupported as error:
            raise Unsupported(f"{what} for a chain of dense layers, which {type(model).__name__} is not ({error})") from None
    if tuple(site for layer in chain.layers for site in layer) != tuple(model.sites):
        raise Unsupported(f"{what} for a chain of dense layers whose sites are the model's, in order; "
                          f"{type(model).__name__}'s are not")
    return chain


def lowered_chain(model) -> tuple[DenseLayers, str]:
    """The chain of dense layers a :class:`~bnn.models.torch_module.TorchModuleNetwork` computes (module notes) and the
    path of its first ``nn.Linear``, whose inputs are the chain's; :class:`Unsupported` saying why for any other."""
    if not isinstance(model, TorchModuleNetwork):
        raise Unsupported("its dense_layers() is None")
    module = model.module
    if any(layer._forward_hooks or layer._forward_pre_hooks for layer in module.modules()):
        raise Unsupported("a layer has a forward hook, which may change its output")
    sites = {site.name: site for site in model.sites}
    owners = list(dict.fromkeys(name.rpartition(".")[0] for name in sites))
    layers = []
    for owner in owners:
        layer = module.get_submodule(owner)
        prefix = f"{owner}." if owner else ""
        if type(layer) is not nn.Linear or layer.bias is None or {f"{prefix}weight", f"{prefix}bias"} - set(sites):
            raise Unsupported(f"its Bayesian parameters of {owner or 'the module'!r} are not the weight and bias of an "
                              f"nn.Linear (a {type(layer).__name__})")
        layers.append((sites[f"{prefix}weight"], sites[f"{prefix}bias"]))
    if type(module) is nn.Sequential:
        return DenseLayers(tuple(layers), _sequential_activation(module, owners)), owners[0]
    if len(owners) == 1 and _makes_the_output(model, owners[0]):
        return DenseLayers(tuple(layers), NO_ACTIVATION), owners[0]
    raise Unsupported(f"its Bayesian nn.Linear layers {owners} are not the tail of an nn.Sequential, nor one layer that "
                      "makes the output")


def _sequential_activation(module: nn.Sequential, owners: list[str]) -> str:
    """The activation between the Bayesian ``nn.Linear`` layers ``owners`` of ``module``, which must be its children
    from the first of them on, alternating with one activation layer of :data:`ACTIVATION_LAYERS`, the same each time."""
    children = list(module.named_children())
    names = [name for name, _ in children]
    if owners[0] not in names:
        raise Unsupported(f"its Bayesian layer {owners[0]!r} is not a child of the nn.Sequential")
    tail = [(name, layer) for name, layer in children[names.index(owners[0]):] if not isinstance(layer, PASS_THROUGH)]
    linear, between = tail[::2], tail[1::2]
    if [name for name, _ in linear] != owners or not isinstance(tail[-1][1], nn.Linear):
        raise Unsupported(f"its children from {owners[0]!r} on are not Bayesian nn.Linear layers {owners} with one "
                          "activation between every two, ending in an nn.Linear")
    activations = set()
    for name, layer in between:
        form = ACTIVATION_LAYERS.get(type(layer))
        if form is None or any(getattr(layer, key) != value for key, value in form[1].items()):
            raise Unsupported(f"its layer {name!r} ({layer}) is not an activation the kernels compile, with torch's "
                              f"default settings: {', '.join(kind.__name__ for kind in ACTIVATION_LAYERS)}")
        activations.add(form[0])
    if len(activations) > 1:
        raise Unsupported(f"its activations differ between layers ({sorted(activations)}); the kernels apply one")
    return activations.pop() if activations else NO_ACTIVATION


def _makes_the_output(model: TorchModuleNetwork, owner: str) -> bool:
    """Whether the module's ``nn.Linear`` at ``owner``, called once, makes its output on a probe batch."""
    outputs: list[torch.Tensor] = []
    handle = model.module.get_submodule(owner).register_forward_hook(lambda layer, args, output: outputs.append(output))
    dtype = next(model.module.parameters()).dtype
    x = torch.randn(PROBE_ROWS, model.in_features, generator=torch.Generator().manual_seed(0), dtype=dtype)
    try:
        with torch.no_grad():
            output = model.module(x)
    finally:
        handle.remove()
    return len(outputs) == 1 and torch.equal(output.reshape(PROBE_ROWS, -1), outputs[0].reshape(PROBE_ROWS, -1))


def chain_inputs(model, x: torch.Tensor) -> torch.Tensor:
    r"""The rows :math:`h_0 = g(x)` the chain of ``model`` reads (module notes): ``x`` for a network that states its
    chain, else the inputs of the lowered chain's first layer in a forward at the point values, computed once."""
    if model.dense_layers() is not None:
        return x
    first = model.module.get_submodule(lowered_chain(model)[1])
    inputs: list[torch.Tensor] = []
    handle = first.register_forward_pre_hook(lambda layer, args: inputs.append(args[0]))
    try:
        with torch.no_grad():  # the chain's inputs do not depend on its own weights: any values serve
            model.forward(x, {site.name: torch.zeros(site.shape, dtype=x.dtype) for site in model.sites})
    finally:
        handle.remove()
    return inputs[0]
