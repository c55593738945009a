"""What a Laplace fit records: the MAP's convergence, the curvature used and the Laplace evidence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from bnn.inference.laplace.linearized import Linearization
from bnn.inference.record import FitRecord, register_record


@register_record
@dataclass(kw_only=True)
class LaplaceRecord(FitRecord):
    r"""The record of :func:`~bnn.inference.laplace.fit_laplace`.

    Attributes
    ----------
    map_seconds : float
        Wall time of the MAP fit (Adam, then the L-BFGS polish).
    hessian, structure : str
        The likelihood curvature and the entries of the precision kept.
    num_weights_covered : int
        Weights with a Gaussian posterior (the rest, outside ``structure``, are held at the MAP).
    map_steps, map_lbfgs_iterations : int
        Adam steps and L-BFGS iterations of the MAP fit.
    map_grad_norm : float
        The largest entry of the log joint's gradient at the MAP; ``map_converged`` says whether it fell below
        the tolerance.
    log_marginal_likelihood : float
        The Laplace estimate of :math:`\log p(\mathcal{D})`.
    prior_precision : dict of str to float, optional
        The prior precision per covered site with a Gaussian prior, after the multiplier.
    prior_precision_multiplier : float
        :math:`\alpha` of :math:`P \to \alpha P` (1 unless tuned).
    tune_prior_precision : bool
        Whether :math:`\alpha` maximised the evidence.
    noise : float, optional
        The maximum-likelihood noise scale of a learned Gaussian noise.
    """

    method: ClassVar[str] = "laplace"
    map_seconds: float
    hessian: str
    structure: str
    num_weights_covered: int
    map_steps: int
    map_lbfgs_iterations: int
    map_grad_norm: float
    map_converged: bool
    log_marginal_likelihood: float
    prior_precision: dict[str, float] | None = None
    prior_precision_multiplier: float
    tune_prior_precision: bool
    noise: float | None = None

    @property
    def converged(self) -> bool:
        """Whether the MAP the Gaussian is centred on converged."""
        return self.map_converged

    def problems(self) -> list[str]:
        if self.map_converged:
            return []
        return [f"the MAP did not converge (largest gradient entry {self.map_grad_norm:.3g} after {self.map_steps} Adam "
                f"steps and {self.map_lbfgs_iterations} L-BFGS iterations): raise map_steps or map_lr, or loosen "
                "map_tolerance"]

    def metrics(self) -> dict[str, Any]:
        return {"hessian": self.hessian, "structure": self.structure, "map_grad_norm": self.map_grad_norm,
                "map_converged": self.map_converged, "log_marginal_likelihood": self.log_marginal_likelihood}

    def load_linearization(self, path: Path, model) -> Linearization | None:
        """The linearised predictive saved at ``path`` by :meth:`~bnn.inference.posterior.Posterior.save`."""
        return Linearization.load(path, model) if path.is_file() else None
