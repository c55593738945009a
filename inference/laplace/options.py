"""The options of a Laplace fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.laplace.curvature import HessianType, Structure, check_combination, covered_from, required_bytes
from bnn.inference.posterior_mode.map_estimate import MAP_MAX_ITER, MAP_TOLERANCE

from bnn.options import Options, choice, flag, option, optional, positive_int, positive_number, seed
from bnn.runtime.memory import parameter_count, value_bytes


@dataclass(frozen=True)
class LaplaceOptions(Options):
    r"""Options of :func:`~bnn.inference.laplace.fit_laplace`.

    Attributes
    ----------
    hessian : {"ggn", "exact"}
        The likelihood curvature, a :class:`~bnn.inference.laplace.curvature.HessianType`.
    structure : {"full", "diag", "last-layer"}
        Which entries of :math:`\Lambda` are kept, a :class:`~bnn.inference.laplace.curvature.Structure`.
    tune_prior_precision : bool, optional
        Scale a Gaussian prior's precision by the :math:`\alpha` maximising the Laplace
        log marginal likelihood at :math:`\theta_{MAP}` (GGN only). ``None`` (the default): wherever that is
        possible (GGN, Gaussian priors on the covered weights), else not; ``True`` refuses where it is not.
    map_steps, map_lr : int, float
        Adam steps and rate of the MAP fit before the polish.
    map_tolerance : float
        The polish stops once the MAP lies within this many posterior standard deviations of the mode (the
        Newton decrement, :mod:`bnn.inference.posterior_mode.gauss_newton`).
    map_max_iter : int
        Iterations of the polish at most (Levenberg-Marquardt, or L-BFGS where a Gauss-Newton step is too
        costly: :func:`~bnn.inference.posterior_mode.gauss_newton.uses_gauss_newton`).
    max_memory_gib : float
        Refuse, before any work, a structure whose curvature needs more memory than this.
    num_samples : int
        Draws from :math:`q` kept in the :class:`~bnn.inference.core.posterior.Posterior` (the MC predictive and ArviZ
        use them).
    seed : int
        Seeds the MAP initialisation and the draws.
    progress : bool
        Show tqdm bars.
    """

    hessian: HessianType = option("ggn", choice(HessianType))
    structure: Structure = option("full", choice(Structure))
    tune_prior_precision: bool | None = option(None, optional(flag))
    map_steps: int = option(1000, positive_int)
    map_lr: float = option(0.01, positive_number)
    map_tolerance: float = option(MAP_TOLERANCE, positive_number)
    map_max_iter: int = option(MAP_MAX_ITER, positive_int)
    max_memory_gib: float = option(2.0, positive_number)
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        random = parameters - covered_from(model, self.structure)
        return {"the MAP fit: Adam's state (4 D, float64)": value_bytes(4 * parameters, torch.float64),
                f"the {self.structure.value} curvature (float64)": required_bytes(self.structure, random, 8),
                f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)}

    def check(self) -> None:
        check_combination(self.hessian, self.structure)
