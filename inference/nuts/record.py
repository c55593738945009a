"""What a NUTS run records: its options, its chains (seeds, times, gradients, faults) and its convergence checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.chain_record import ChainRecord
from bnn.inference.nuts.options import NUTSOptions


@dataclass(kw_only=True)
class NUTSRecord(ChainRecord):
    """The record of :func:`~bnn.inference.nuts.fit_nuts`.

    Attributes
    ----------
    options : NUTSOptions
        The options it ran with.
    num_chains : int
        The chains run (``options.num_chains``, or its default for the machine).
    init : str
        The chains' start: ``"prior"``, ``"map"`` or ``"values"`` (given site values).
    chain_method : str
        ``"parallel"`` (processes) or ``"sequential"``, as the chains actually ran.
    potential : str
        ``"flat"`` (the model's fast potential) or ``"trace"`` (Pyro's generic one); ``potential_reason`` says why
        the flat one was not used.
    whitened : bool
        The nutpie engine's chains sampled in the whitened coordinates of the Laplace approximation at their MAP starts
        (:mod:`bnn.inference.nuts.whitening`; ``NUTSOptions.whiten``); their ``chain_gradients`` count its Hessian's.
    kernel_gap : str, optional
        Why the compiled kernel did not evaluate the flat potential, which then ran on torch (the nutpie engine with
        ``jit_compile``; :func:`~bnn.inference.nuts.numba_potential.kernel_gap`); ``None`` when it did, or was not
        asked for.
    chain_seeds, chain_seconds, chain_gradients : list
        Per chain kept: its seed, wall time and gradient evaluations (warmup included).
    chain_backends : list of str, optional
        Per chain kept, what evaluated the nutpie engine's potential
        (:class:`~bnn.inference.nuts.potential.Backend`): ``numba`` (the compiled kernel, a torch module lowered to it
        included: :mod:`bnn.inference.nuts.lowering`), ``compile``, ``trace`` or ``eager`` (torch); ``None`` for the
        Pyro engine.
    gradient_evaluations : int
        The sum of ``chain_gradients``.
    diagnostics : ChainDiagnostics
        R-hat (weights and predictive), ESS, divergences and the verdict.
    chains_kept : list of int
        The chains whose draws the posterior holds.
    failed_chains : dict of str to str, optional
        The error of every chain that failed.
    incomplete : bool
        The run was interrupted (Ctrl-C, SIGTERM) and holds fewer draws than asked; ``incomplete_reason`` says what.
    """

    options: NUTSOptions
    num_chains: int
    init: str
    chain_method: str
    potential: str
    potential_reason: str | None = None
    whitened: bool = False
    kernel_gap: str | None = None
    chain_seeds: list[int]
    chain_seconds: list[float]
    chain_gradients: list[int]
    chain_backends: list[str] | None = None
    gradient_evaluations: int
    chains_kept: list[int]
    failed_chains: dict[str, str] | None = None

    def problems(self) -> list[str]:
        failed = [f"chains failed: {self.failed_chains}"] if self.failed_chains else []
        return failed + super().problems()

    def metrics(self) -> dict[str, Any]:
        failed = {"failed_chains": self.failed_chains} if self.failed_chains else {}
        return {**super().metrics(), "engine": self.options.engine.value, **failed}
