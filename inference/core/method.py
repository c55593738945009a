"""An inference method as the collection registers it: a name, a typed option set and the function that runs it,
with the facts the rest of the collection asks of it (what it needs of the network, what it costs, how far a time
budget may shrink it, what to try when its own check fails, and how ``bnn uci`` runs it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from bnn.inference.core.cost_model import CostModel
from bnn.inference.core.device import Device, computing_on, moved, resolved_device
from bnn.inference.core.hierarchical_refusal import HierarchicalRefusal
from bnn.inference.core.model_requirement import ModelRequirement
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.core.point_parameters import check_point_values_set, held_fixed
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.record import FitRecord, register_record
from bnn.inference.core.uci_protocol import UCIProtocol

from bnn.options import Options
from bnn.registry import Registry
from bnn.runtime.memory import check_memory, network_needs
from bnn.runtime.workers import fit_threads


@dataclass(frozen=True)
class Method:
    """One inference method.

    Attributes
    ----------
    name : str
        The name ``fit(..., method=name)`` and the command line take.
    options : type of Options
        Its option set; building it validates every option before any work starts. The command line makes a flag of
        each of its fields (:mod:`bnn.cli.arguments`).
    run : callable
        ``run(model, x, y, options) -> Posterior`` on validated training tensors.
    record : type of FitRecord
        What a fit records (:mod:`bnn.inference.core.record`); :func:`register_method` registers it under
        :attr:`name`.
    requires : ModelRequirement, optional
        What it needs of the network beyond the model interface (``None``: any
        :class:`~bnn.models.network.BayesianNetwork`); checked before any work.
    refuses_hierarchical : HierarchicalRefusal, optional
        Why it cannot fit the latent scales of hierarchical priors (:mod:`bnn.models.hierarchical_priors`), checked
        before any work; ``None``: it fits them (or checks its own options for them).
    cost : CostModel, optional
        How its cost is counted and timed (``compare`` prints the estimate; ``--time-budget`` spends by it);
        ``None``: no estimate.
    budget_floors : mapping of str to int
        The options a time budget may lower, each with the least value it lowers it to (empty: a run of fixed
        length).
    advice : str, optional
        What to try, in command-line options, when its own convergence check fails (the report says it).
    uci : UCIProtocol
        How ``bnn uci`` runs it.
    compare_options : mapping
        ``compare``'s own defaults for it, under any option the user gives.
    point_estimate : bool
        Its posterior is one point (the MAP network): the baseline the Bayesian fits are set against.
    model_defaults : callable, optional
        ``model_defaults(model) -> dict``: defaults that depend on the network, under any option the user gives (SVI's
        guide is ``autonormal`` for a network with hierarchical priors).
    cpu_only : str, optional
        Why it computes on the CPU whatever ``device`` says (``device="cuda"`` is refused with this reason, ``"auto"``
        is the CPU); ``None``: it computes on the device chosen (:mod:`bnn.inference.core.device`).
    """

    name: str
    options: type[Options]
    run: Callable[[Any, torch.Tensor, torch.Tensor, Options], Posterior]
    record: type[FitRecord]
    requires: ModelRequirement | None = None
    refuses_hierarchical: HierarchicalRefusal | None = None
    cost: CostModel | None = None
    budget_floors: Mapping[str, int] = field(default_factory=dict)
    advice: str | None = None
    uci: UCIProtocol = field(default_factory=UCIProtocol)
    compare_options: Mapping[str, Any] = field(default_factory=dict)
    model_defaults: Callable[[Any], dict[str, Any]] | None = None
    point_estimate: bool = False
    cpu_only: str | None = None

    def parse(self, options: Mapping[str, Any], model=None) -> Options:
        """The parsed option set (``ValueError`` for unknown or bad options, and for ``device="cuda"`` where the method
        computes on the CPU: :attr:`cpu_only`); with ``model``, its :attr:`model_defaults` fill the options the user
        left out."""
        defaults = self.model_defaults(model) if model is not None and self.model_defaults is not None else {}
        parsed = self.options.parse(self.name, {**defaults, **options})
        if self.cpu_only is not None and parsed.device is Device.CUDA:
            raise ValueError(f"{self.name} computes on the CPU ({self.cpu_only}): use device='cpu' or 'auto', or a "
                             "method that computes on the GPU")
        return parsed

    def check_model(self, model, *, point_values_set: bool = True) -> None:
        """Refuse, with a ``ValueError`` naming the network (or its hierarchical priors) and methods that work, a
        network it cannot fit (or, unless ``point_values_set`` is false, a partly Bayesian one whose point parameters
        are not fitted yet: :mod:`bnn.inference.core.point_parameters`)."""
        if self.requires is not None:
            self.requires.check(self.name, model, [name for name in METHODS.names() if METHODS.get(name).requires is None])
        if self.refuses_hierarchical is not None:
            self.refuses_hierarchical.check(self.name, model)
        if point_values_set:
            check_point_values_set(self.name, model)

    def __call__(self, model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
        """Parse ``options`` (``ValueError`` for unknown or bad ones), check that the method can fit ``model``
        (:attr:`requires`) and that the machine has the memory the fit needs (:mod:`bnn.runtime.memory`; ``ValueError``
        with the numbers), then run on a copy of ``model`` (:func:`~bnn.inference.core.model_snapshot.snapshot_model`:
        changing ``model`` later leaves the fit alone), on one torch thread unless the user chose a count
        (:func:`~bnn.runtime.workers.fit_threads`), on the device the options name (the copy and the data moved there,
        the posterior brought back to the CPU: :mod:`bnn.inference.core.device`). The record lists the parameters a
        partly Bayesian network holds fixed (``held_at_map``) and the device (``device``)."""
        parsed = self.parse(options, model)
        self.check_model(model)
        check_memory(self.name, {**network_needs(model, x.shape[0]), **parsed.memory_needs(model)})
        device = resolved_device(parsed.device, gpu=self.cpu_only is None)
        copy = snapshot_model(model) if device.type == "cpu" else moved(model, device)
        with fit_threads(), computing_on(device):
            posterior = self.run(copy, x.to(device), y.to(device), parsed)
        if device.type != "cpu":
            posterior = moved(posterior, torch.device("cpu"))
        posterior.record.held_at_map = held_fixed(model)
        posterior.record.device = device.type
        return posterior


METHODS: Registry[Method] = Registry("method")
"""Every inference method by name: the one list. :mod:`bnn.inference.fit` registers each method package's
``METHOD`` (or ``METHODS``); the command line, ``compare``, ``bnn uci``, the documentation's tables and the tests'
per-method options are derived from it or checked against it."""


def register_method(method: Method) -> None:
    """Add ``method`` to :data:`METHODS` and its record class to the records under the method's name
    (:func:`~bnn.inference.core.record.register_record`: the record's method name is the method's)."""
    METHODS.register(method.name, method)
    register_record(method.record, method.name)
