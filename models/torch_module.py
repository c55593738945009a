r"""Any ``torch.nn.Module`` made Bayesian, wholly or in part: :func:`from_module`.

A module :math:`f(x; \theta)` with parameters :math:`\theta = (\theta_B, \theta_P)` becomes the network

.. math::

    \theta_B \sim p(\theta_B), \qquad y_i \mid x_i, \theta_B \sim p\big(y_i \mid f(x_i; \theta_B, \hat\theta_P)\big),

where :math:`\theta_B` are the parameters chosen to be Bayesian (``bayesian=``: all of them by default) and
:math:`\hat\theta_P` the others, held fixed at a point. Each Bayesian parameter is a weight site named by its
parameter path (``"0.weight"`` of an ``nn.Sequential``, ``"features.0.weight"``), in ``module.named_parameters()``
order; its :attr:`~bnn.models.sites.WeightSite.layer` is the index of the submodule that owns it (in that order), its
group the submodule's path, and its fan-in ``numel / shape[0]`` (a bias takes its owner's, as a dense layer's does).
Priors are chosen per site, per layer (the submodule path) or ``"*"``, as for every network.

The point :math:`\hat\theta_P` of a partly Bayesian network (``bayesian="last-layer"`` or a list of names) is the MAP
of the wholly Bayesian network,

.. math::

    \hat\theta = \arg\max_\theta \; \log p(y \mid x, \theta) + \log p(\theta), \qquad \hat\theta_P = \hat\theta|_P,

which :func:`bnn.inference.fit` fits first (:mod:`bnn.inference.core.point_parameters`): a network whose point
values are not set yet (:meth:`TorchModuleNetwork.needs_point_fit`) is fitted at its MAP, then the chosen method fits
:math:`\theta_B` with :math:`\hat\theta_P` held fixed, and the posterior's record lists them (``held_at_map``).

:meth:`~TorchModuleNetwork.forward` evaluates the module with :func:`torch.func.functional_call` on the weights, the
leading sample dimensions flattened into one and mapped with :func:`torch.func.vmap` (no Python loop over draws), so
Pyro's vectorised particles, ``Predictive(parallel=True)`` and the per-row Jacobians of Laplace work. The module is
copied and evaluated in eval mode: dropout is off (the weights' posterior is the uncertainty; MC dropout, which needs
the network to say where its dropout goes, :meth:`~bnn.models.network.BayesianNetwork.dropped_inputs`, refuses it),
and a BatchNorm layer in eval mode normalises with its running statistics, fixed constants that make it an affine
layer; one in training mode would normalise each batch by its own statistics (the rows' likelihoods would not
factorise) and is refused.

What cannot be made Bayesian is refused when the network is built, before any work: a module without parameters or
with a parameter of no elements, a BatchNorm (or any layer tracking running statistics) in training mode or one
keeping no running statistics, a module whose forward fails on a probe batch or under ``vmap`` (recurrent layers:
``nn.LSTM`` has no batching rule), an output that is not a floating-point tensor ``(n, K)`` or ``(n,)``, and a
``bayesian=`` name that matches no parameter. The forward must be a function of ``x`` and the weights: the probe
refuses one that changes ``x`` in place or its own state (a buffer, or an attribute that changes the next output),
and one whose output leads no gradient back to a parameter the fit fits (``torch.no_grad()``, ``.detach()``). A 0-dim
parameter is a site of shape ``()``; a parameter shared by two layers (tied weights) is one site, under its first
name.

Saving: the module's structure is code, which a results folder does not run. :meth:`TorchModuleNetwork.config`
holds its description (its ``repr``, for reports, checkpoints' fingerprints and the check on loading);
:meth:`TorchModuleNetwork.state` its tensors (the module's parameters and buffers, and the point values), which
:meth:`bnn.inference.Posterior.save` writes as ``network.safetensors``. :meth:`~bnn.inference.Posterior.load`
fills the module given again (``module=``) with them, after checking that its ``repr``, parameter names and shapes
are the saved ones; a pickle of the module, ``module.pt``, is written beside and read only under ``trust=True``
(unpickling runs code named in the file: only for folders you wrote yourself).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from bnn.models.likelihoods import Likelihood
from bnn.models.network import ARCHITECTURES, BayesianNetwork, ModuleMismatchError
from bnn.models.priors import Prior
from bnn.models.sites import WeightSite
from torch import nn
from torch.func import functional_call, vmap

PROBE_ROWS = 3
"""Rows of the probe batch the module is run on when the network is built."""


def _owner(name: str) -> str:
    """The path of the submodule that owns the parameter ``name`` (``""`` for the module's own)."""
    return name.rsplit(".", 1)[0] if "." in name else ""


def _module_sites(parameters: Mapping[str, torch.Tensor]) -> tuple[WeightSite, ...]:
    """A site per parameter, in order: layer = index of its owner among the owners, fan-in = ``numel / shape[0]``
    (a parameter of fewer than two dimensions takes the fan-in of its owner's first larger one, else 1)."""
    owners = list(dict.fromkeys(_owner(name) for name in parameters))
    owner_fan_in = {}
    for name, value in parameters.items():
        if value.dim() >= 2:
            owner_fan_in.setdefault(_owner(name), value.numel() // value.shape[0])
    return tuple(
        WeightSite(name, owners.index(_owner(name)), value.shape,
                   value.numel() // value.shape[0] if value.dim() >= 2 else owner_fan_in.get(_owner(name), 1))
        for name, value in parameters.items()
    )


def _check_structure(module: nn.Module) -> None:
    """Refuse a module without parameters, with a parameter of no elements, or with a layer that normalises each batch
    by its own statistics (one tracking running statistics in training mode, a BatchNorm keeping none)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"from_module needs a torch.nn.Module, got {type(module).__name__}")
    if not any(True for _ in module.parameters()):
        raise ValueError(f"{type(module).__name__} has no parameters, so there is nothing to make Bayesian; give a "
                         "module with at least one parameter (an nn.Linear, ...)")
    for name, value in module.named_parameters():
        if value.numel() == 0:
            raise ValueError(f"parameter {name!r} has no elements (shape {tuple(value.shape)}): nothing in it can be "
                             "Bayesian; remove it from the module")
    for path, layer in module.named_modules():
        layer_name = f"layer {path or '(the module)'!r} ({type(layer).__name__})"
        if getattr(layer, "track_running_stats", False) and layer.training:
            raise ValueError(f"{layer_name} is in training mode and tracks running statistics: it would normalise each "
                             "batch by its own statistics, so the rows' likelihoods do not factorise; call "
                             "module.eval() first to use its running statistics as fixed constants (an affine layer), "
                             "or remove it")
        if isinstance(layer, nn.modules.batchnorm._BatchNorm) and not layer.track_running_stats:
            raise ValueError(f"{layer_name} keeps no running statistics (track_running_stats=False): it normalises each "
                             "batch by its own statistics in any mode, so the rows' likelihoods do not factorise; "
                             "build it with track_running_stats=True and fit its statistics on the data first (then "
                             "module.eval()), or remove it")


STATELESS = ("a network's output must depend on x and the weights alone (a method evaluates it many times and "
             "prediction again later); keep the state out of forward")


def _check_pure(module: nn.Module, x: torch.Tensor, parameters: Mapping[str, torch.Tensor], fitted: Sequence[str],
                buffers: Mapping[str, torch.Tensor]) -> None:
    """Refuse a forward that is not a function of ``x`` and the weights alone: one that changes ``x`` in place or its own
    state (``buffers``, the module's buffers before the first probe; an attribute that changes the next output), or
    one whose output leads no gradient back to a parameter in ``fitted`` (``torch.no_grad()``, ``.detach()``)."""
    name = type(module).__name__
    given = x.clone()
    weights = {key: value.clone().requires_grad_(key in fitted) for key, value in parameters.items()}
    first = functional_call(module, weights, (given,))
    second = functional_call(module, weights, (given,))
    if not torch.equal(given, x):
        raise ValueError(f"{name} changes its input x in place (an operation such as x.mul_(2) or x += 1 on x itself), "
                         "so the data change with every call; compute a new tensor instead (x = x * 2)")
    changed = [key for key, value in module.named_buffers() if key not in buffers or not torch.equal(value, buffers[key])]
    if changed:
        raise ValueError(f"{name} changes its own state when it runs: its buffer {changed[0]!r} changed between calls; "
                         f"{STATELESS}")
    if not torch.equal(first.detach().nan_to_num(), second.detach().nan_to_num()):  # nan_to_num: NaN equals NaN here
        raise ValueError(f"{name} changes its own state when it runs: two calls at the same x and weights gave different "
                         f"outputs (an attribute it updates?); {STATELESS}")
    wanted = [key for key in parameters if key in fitted]
    gradients = (torch.autograd.grad(first.sum(), [weights[key] for key in wanted], allow_unused=True)
                 if first.requires_grad else [None] * len(wanted))
    missing = [key for key, gradient in zip(wanted, gradients) if gradient is None]
    if missing:
        raise ValueError(f"no gradient reaches the parameters {missing} from {name}'s output, so a fit would leave them "
                         "at their start (parameters held at a point are fitted at the MAP first): its forward detaches "
                         "them (torch.no_grad(), .detach(), a NumPy round trip) or does not use them; let the gradient "
                         "flow to them, or remove the parameters the output does not use")


def _bayesian_names(module: nn.Module, bayesian: str | Sequence[str]) -> list[str]:
    """The parameter names ``bayesian`` chooses: ``"all"``, ``"last-layer"`` (the last ``nn.Linear``'s) or names and
    name prefixes (``"4"`` chooses ``"4.weight"`` and ``"4.bias"``); ``ValueError`` for one that matches nothing."""
    names = [name for name, _ in module.named_parameters()]
    if bayesian == "all":
        return names
    if bayesian == "last-layer":
        linear = [path for path, layer in module.named_modules() if isinstance(layer, nn.Linear)]
        if not linear:
            raise ValueError(f"bayesian='last-layer' takes the last nn.Linear, and {type(module).__name__} has none; "
                             f"name the parameters instead, from {names}")
        prefix = f"{linear[-1]}." if linear[-1] else ""
        return [name for name in names if name.startswith(prefix) and "." not in name[len(prefix):]]
    if isinstance(bayesian, str) or not isinstance(bayesian, Sequence) or not bayesian:
        raise ValueError(f"bayesian must be 'all', 'last-layer' or a non-empty list of parameter names or prefixes, "
                         f"got {bayesian!r}")
    chosen = []
    for key in bayesian:
        matched = [name for name in names if name == key or name.startswith(f"{key}.")]
        if not matched:
            raise ValueError(f"bayesian names {key!r}, which matches no parameter of {type(module).__name__}; its "
                             f"parameters are {names}")
        chosen.extend(matched)
    return [name for name in names if name in chosen]


def _call_while_tracing(module: nn.Module, values: Mapping[str, torch.Tensor], args: tuple) -> torch.Tensor:
    """``module(*args)`` with its parameters and buffers replaced by ``values`` for the call, for TorchScript tracing (Pyro's
    ``JitTrace_ELBO``), which :func:`torch.func.functional_call` refuses: each entry is put in its owner's
    ``_parameters`` or ``_buffers`` (a tied parameter under each of its names) and the module's own tensors restored
    after the call, whatever it raises."""
    tied: dict[int, list[str]] = {}
    for name, value in module.named_parameters(remove_duplicate=False):
        tied.setdefault(id(value), []).append(name)
    names = {aliases[0]: aliases for aliases in tied.values()}  # named_parameters() gives a tied one its first name
    saved = []
    try:
        for name, value in values.items():
            for alias in names.get(name, [name]):
                owner, _, leaf = alias.rpartition(".")
                layer = module.get_submodule(owner)
                table = layer._parameters if leaf in layer._parameters else layer._buffers
                saved.append((table, leaf, table[leaf]))
                table[leaf] = value
        return module(*args)
    finally:
        for table, leaf, original in reversed(saved):
            table[leaf] = original


def _with_sample_shape(value: torch.Tensor, sample: torch.Size, shape: torch.Size) -> torch.Tensor:
    """``value`` ``(*batch, *shape)`` broadcast to ``(*sample, *shape)`` (itself when it has that shape already)."""
    return value if value.shape == (*sample, *shape) else value.expand(*sample, *shape)


def _first_layer_inputs(module: nn.Module) -> int:
    """The inputs of the module's first layer with parameters when it is an ``nn.Linear``; ``ValueError`` otherwise."""
    first = next(layer for layer in module.modules() if any(True for _ in layer.parameters(recurse=False)))
    if isinstance(first, nn.Linear):
        return first.in_features
    raise ValueError(f"in_features cannot be read from {type(module).__name__}: its first layer with parameters is a "
                     f"{type(first).__name__}, not an nn.Linear (a convolution's inputs depend on the image size the "
                     "module reshapes x to); give in_features=, the columns of x")


@ARCHITECTURES.register("torch-module")
class TorchModuleNetwork(BayesianNetwork):
    r"""A ``torch.nn.Module`` as a Bayesian network (module notes); build it with :func:`from_module`.

    Parameters
    ----------
    module : torch.nn.Module
        The network; it is copied (later changes to it do not reach this network) and evaluated in eval mode.
    bayesian : {"all", "last-layer"} or sequence of str
        The parameters that get a posterior: all, those of the last ``nn.Linear`` in module order, or the parameters
        named (a name or a prefix of names: ``"classifier"``, ``"4.weight"``). The others are held fixed at
        ``point_values``.
    in_features, out_features : int, optional
        The columns of ``x`` and the outputs; read from the first ``nn.Linear`` and from a probe forward when left
        out.
    point_values : mapping of str to torch.Tensor, optional
        The values of the parameters that are not Bayesian; ``None`` until :func:`bnn.inference.fit` sets them at the
        MAP (:mod:`bnn.inference.core.point_parameters`). Ignored (and must be ``None``) for ``bayesian="all"``.
    prior, likelihood
        As :class:`~bnn.models.network.BayesianNetwork`; a prior mapping names sites (parameter paths) or layers
        (submodule paths).

    Raises
    ------
    TypeError
        For a ``module`` that is not a ``torch.nn.Module``.
    ValueError
        For what the module notes list, before any work, each naming the fix.
    """

    def __init__(self, module: nn.Module, *, bayesian: str | Sequence[str] = "all", in_features: int | None = None,
                 out_features: int | None = None, point_values: Mapping[str, torch.Tensor] | None = None,
                 prior: Prior | str | Mapping[str, Any] = "gaussian",
                 likelihood: Likelihood | str | Mapping[str, Any] = "gaussian") -> None:
        _check_structure(module)
        self.module = copy.deepcopy(module).eval()
        parameters = {name: value.detach() for name, value in self.module.named_parameters()}
        self.bayesian = _bayesian_names(self.module, bayesian)
        self.point_names = [name for name in parameters if name not in self.bayesian]
        self.point_values = None if point_values is None else self._checked_point_values(point_values, parameters)
        in_features = _first_layer_inputs(self.module) if in_features is None else in_features
        sites = _module_sites(parameters)
        self._all_sites = sites
        chosen = tuple(site for site in sites if site.name in self.bayesian)
        probe = self._probe(in_features, parameters)
        super().__init__(in_features, probe if out_features is None else out_features, chosen, prior=prior,
                         likelihood=likelihood)
        if probe != self.out_features:
            raise ValueError(f"{type(module).__name__} makes {probe} outputs on a probe batch, not the out_features="
                             f"{self.out_features} given")

    def _checked_point_values(self, values: Mapping[str, torch.Tensor],
                              parameters: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``values`` checked to hold exactly the point parameters, each of its parameter's shape."""
        if set(values) != set(self.point_names):
            raise ValueError(f"point_values must give the parameters that are not Bayesian, {self.point_names}, got "
                             f"{sorted(values)}")
        for name in self.point_names:
            if tuple(values[name].shape) != tuple(parameters[name].shape):
                raise ValueError(f"point value {name!r} has shape {tuple(values[name].shape)}, the parameter "
                                 f"{tuple(parameters[name].shape)}")
        return {name: torch.as_tensor(values[name]).detach().clone() for name in self.point_names}

    def _probe(self, in_features: int, parameters: Mapping[str, torch.Tensor]) -> int:
        """The outputs the module makes on a probe batch of ``PROBE_ROWS`` rows, run as :meth:`forward` runs it
        (two draws under ``vmap``); ``ValueError`` naming the module's error, or an output that is not ``(n, K)`` or
        ``(n,)``."""
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive integer, got {in_features!r}")
        dtype = next(iter(parameters.values())).dtype
        x = torch.randn(PROBE_ROWS, in_features, generator=torch.Generator().manual_seed(0), dtype=dtype)
        draws = {name: value.expand(2, *value.shape) for name, value in parameters.items()}
        buffers = {name: value.clone() for name, value in self.module.named_buffers()}
        try:
            with torch.no_grad():
                output = vmap(lambda values: functional_call(self.module, values, (x,)))(draws)
        except Exception as error:  # noqa: BLE001 - a user's forward may raise anything
            raise ValueError(f"{type(self.module).__name__} cannot be evaluated as a Bayesian network: its forward on "
                             f"a probe batch x of shape {tuple(x.shape)} under torch.func.functional_call and vmap "
                             f"failed ({type(error).__name__}: {error}); it must map (n, in_features) to (n, K) and "
                             "run under torch.func.vmap (recurrent layers such as nn.LSTM do not): check in_features= "
                             "or make the Bayesian part a module that does") from None
        name = type(self.module).__name__
        if not isinstance(output, torch.Tensor):
            raise ValueError(f"{name} returns a {type(output).__name__}, not a tensor: a network's forward must return "
                             "the output tensor, (n, K) or (n,); wrap the module in one whose forward returns the output "
                             "to fit (such as the first element of the tuple)")
        if not output.is_floating_point():
            raise ValueError(f"{name} returns {output.dtype} outputs: a network's output is floating point (the means "
                             "or logits the likelihood reads), and no gradient passes through rounding to integers; "
                             "return the output before it is rounded or cast")
        if output.dim() not in (2, 3) or output.shape[1] != PROBE_ROWS:
            raise ValueError(f"{name} maps a probe batch of {PROBE_ROWS} rows to shape "
                             f"{tuple(output.shape[1:])}; a network's output is (n, K), or (n,) for one output")
        _check_pure(self.module, x, parameters, list(parameters) if self.point_values is None else self.bayesian, buffers)
        return 1 if output.dim() == 2 else output.shape[2]

    # ----------------------------------------------------------- the network
    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The module's output ``(*sample, n, out_features)`` at the Bayesian weights (each ``(*sample, *shape)``)
        and the point values, mapped over the flattened sample dimensions with :func:`torch.func.vmap`."""
        if x.dim() != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape (n, {self.in_features}), got {tuple(x.shape)}")
        if self.point_names and self.point_values is None:
            raise ValueError(f"the parameters {self.point_names} are not Bayesian and their point values are not set "
                             "yet: fit the network with bnn.inference.fit, which fits them at the MAP first")
        sample = torch.broadcast_shapes(*(weights[site.name].shape[:weights[site.name].dim() - len(site.shape)]
                                          for site in self.sites))
        dtype = weights[self.sites[0].name].dtype
        constants = {name: value.to(dtype) for name, value in (self.point_values or {}).items()}
        constants.update({name: value.to(dtype) if value.is_floating_point() else value
                          for name, value in self.module.named_buffers()})

        call = _call_while_tracing if torch.jit.is_tracing() else functional_call

        def output(values: dict[str, torch.Tensor]) -> torch.Tensor:
            result = call(self.module, {**constants, **values}, (x,))
            return result.unsqueeze(-1) if result.dim() == 1 else result  # (n,) for one output is (n, 1)

        batched = output
        for _ in sample:  # one vmap per sample dimension: no reshape by sizes, which TorchScript tracing mistraces
            batched = vmap(batched)
        return batched({site.name: _with_sample_shape(weights[site.name], sample, site.shape) for site in self.sites})

    # ------------------------------------------------------- point parameters
    def needs_point_fit(self) -> bool:
        """Whether some parameters are not Bayesian and their point values are not set yet."""
        return bool(self.point_names) and self.point_values is None

    def held_fixed(self) -> list[str]:
        """The parameters held fixed at a point (not Bayesian), in module order."""
        return list(self.point_names)

    def all_bayesian(self) -> TorchModuleNetwork:
        """The same module with every parameter Bayesian, under this network's prior (its ``"*"`` entry, or the
        Gaussian default, for the parameters this one holds fixed) and likelihood: its MAP gives the point values."""
        table = {"*": "gaussian", **self._prior_table}
        return TorchModuleNetwork(self.module, in_features=self.in_features, out_features=self.out_features,
                                  prior=table, likelihood=self.likelihood)

    def with_point_values(self, values: Mapping[str, torch.Tensor]) -> TorchModuleNetwork:
        """This network with the point parameters set to ``values`` (a mapping that may hold more: only the
        point parameters are read)."""
        return TorchModuleNetwork(self.module, bayesian=self.bayesian, in_features=self.in_features,
                                  out_features=self.out_features,
                                  point_values={name: values[name] for name in self.point_names},
                                  prior=dict(self._prior_table), likelihood=self.likelihood)

    # --------------------------------------------------------------- configs
    def arguments(self) -> dict[str, Any]:
        """A JSON-able description: the sizes, the Bayesian parameters and the module's ``repr`` (the module itself is
        in :meth:`state`)."""
        return {"in_features": self.in_features, "out_features": self.out_features, "bayesian": list(self.bayesian),
                "module": repr(self.module)}

    def state(self) -> dict[str, torch.Tensor]:
        """The module's parameters and buffers (``"module.<name>"``) and the point values (``"point.<name>"``), as
        tensors (module notes)."""
        tensors = {f"module.{name}": value for name, value in self.module.state_dict().items()}
        tensors.update({f"point.{name}": value for name, value in (self.point_values or {}).items()})
        return tensors

    def state_module(self) -> nn.Module:
        """The module (a copy, in eval mode) whose structure :meth:`state` fills."""
        return self.module

    def __repr__(self) -> str:
        priors = ", ".join(f"{k}: {type(p).__name__}" for k, p in self._prior_table.items())
        held = f", held at a point: {self.point_names}" if self.point_names else ""
        return (f"TorchModuleNetwork({type(self.module).__name__}, {self.in_features} -> {self.out_features}, "
                f"bayesian={self.bayesian}{held}, prior={{{priors}}}, likelihood={type(self.likelihood).__name__})")

    @classmethod
    def from_state(cls, config: Mapping[str, Any], state: Mapping[str, torch.Tensor],
                   module: nn.Module | None = None) -> TorchModuleNetwork:
        """Rebuild the network from its :meth:`~bnn.models.network.BayesianNetwork.config`, its :meth:`state` and the
        ``module`` whose structure the saved tensors fill (a copy of it is filled; ``module`` is left as it is).

        Raises
        ------
        ModuleMismatchError
            When ``module`` is missing, or its ``repr``, parameter names or shapes are not the saved ones.
        ValueError
            When the config or the tensors are damaged.
        """
        missing = sorted({"in_features", "out_features", "bayesian", "prior", "likelihood", "module"} - set(config))
        if missing:
            raise ValueError(f"a torch-module network's config lacks {missing}; the saved files are damaged: fit and "
                             "save the posterior again")
        saved = config["module"]
        if module is None:
            made_from = str(saved).split("(", 1)[0]
            raise ModuleMismatchError(
                f"this network was made from a torch module ({made_from}), whose structure is code, which is not read "
                "from a results folder; give the module again, Posterior.load(path, module=YourModule(...)) (its "
                "weights are read from network.safetensors), or, for a folder you wrote yourself, trust=True to "
                "unpickle module.pt (unpickling runs code named in the file)")
        if not isinstance(module, nn.Module):
            raise ModuleMismatchError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if repr(module) != saved:
            raise ModuleMismatchError(f"the module given is not the one saved: its structure is\n{module!r}\nand the "
                                      f"saved one\n{saved}\ngive the module the fit was made with")
        module_state = {name[len("module."):]: value for name, value in state.items() if name.startswith("module.")}
        expected = {name: tuple(value.shape) for name, value in module.state_dict().items()}
        found = {name: tuple(value.shape) for name, value in module_state.items()}
        if expected != found:
            differ = sorted(set(expected) ^ set(found) or {n for n in expected if expected[n] != found[n]})
            raise ModuleMismatchError(f"the module given has other parameters or shapes than the saved ones (first "
                                      f"differences: {differ[:3]}); give the module the fit was made with")
        filled = copy.deepcopy(module)
        filled.load_state_dict({name: value.to(module.state_dict()[name].dtype) for name, value in module_state.items()})
        points = {name[len("point."):]: value for name, value in state.items() if name.startswith("point.")}
        return cls(filled, bayesian=config["bayesian"], in_features=config["in_features"],
                   out_features=config["out_features"], point_values=points or None, prior=config["prior"],
                   likelihood=config["likelihood"])

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BayesianNetwork:
        """Refused: the config alone does not hold the module (:meth:`from_state` rebuilds it)."""
        raise ValueError("a torch-module network's config does not hold its module, so the config alone cannot rebuild "
                         "it; load the saved posterior with Posterior.load(path, module=...), or call from_module on "
                         "the module again")


def from_module(module: nn.Module, *, prior: Prior | str | Mapping[str, Any] = "gaussian",
                likelihood: Likelihood | str | Mapping[str, Any] = "gaussian", bayesian: str | Sequence[str] = "all",
                in_features: int | None = None, out_features: int | None = None) -> TorchModuleNetwork:
    """``module`` as a Bayesian network that every method of :func:`bnn.inference.fit` can fit (module notes).

    Parameters
    ----------
    module : torch.nn.Module
        A network mapping ``x`` of shape ``(n, in_features)`` to ``(n, K)`` (or ``(n,)`` for one output).
    prior, likelihood
        As :class:`~bnn.models.network.BayesianNetwork`: a prior mapping names parameters (``"0.weight"``) or
        submodules (``"0"``).
    bayesian : {"all", "last-layer"} or sequence of str
        The parameters that get a posterior; the others are fitted at the MAP first and held fixed
        (:class:`TorchModuleNetwork`).
    in_features, out_features : int, optional
        Read from the first ``nn.Linear`` and a probe forward when left out; required where they cannot be.

    Examples
    --------
    >>> net = torch.nn.Sequential(torch.nn.Linear(1, 20), torch.nn.Tanh(), torch.nn.Linear(20, 1))   # doctest: +SKIP
    >>> posterior = fit(from_module(net, bayesian="last-layer"), (x, y), "laplace")                  # doctest: +SKIP
    """
    return TorchModuleNetwork(module, bayesian=bayesian, in_features=in_features, out_features=out_features,
                              prior=prior, likelihood=likelihood)
