"""The options of a Laplace fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bnn.guides.flat_weights import num_weights
from bnn.inference.core.temperature import UNTEMPERED, parse_temperature
from bnn.inference.laplace.curvature import (
    GIB,
    HessianType,
    Structure,
    check_combination,
    covered_from,
    required_bytes,
)
from bnn.inference.laplace.subnetwork import DEFAULT_SUBNETWORK_SIZE
from bnn.inference.map_search.map_options import MapFitOptions

from bnn.options import choice, flag, option, optional, positive_int, positive_number, seed
from bnn.runtime.memory import parameter_count, peak_stage, value_bytes


class LinkApprox(str, Enum):
    """How a classifier's linearised predictive turns the logits' Gaussian into class probabilities."""

    PROBIT = "probit"
    BRIDGE = "bridge"


@dataclass(frozen=True)
class LaplaceOptions(MapFitOptions):
    r"""Options of :func:`~bnn.inference.laplace.fit_laplace`: the MAP fit's
    (:class:`~bnn.inference.map_search.map_options.MapFitOptions`) and

    Attributes
    ----------
    hessian : {"ggn", "exact"}
        The likelihood curvature, a :class:`~bnn.inference.laplace.curvature.HessianType`.
    structure : {"full", "diag", "last-layer", "kron", "subnetwork"}, optional
        Which entries of :math:`\Lambda` are kept, a :class:`~bnn.inference.laplace.curvature.Structure`. ``None``
        (the default): ``full`` where its curvature fits ``max_memory_gib`` and is cheap (the MAP's polish is
        Levenberg-Marquardt, which forms it at every step), else ``kron`` where every layer has Kronecker factors
        (:func:`~bnn.inference.laplace.default_structure.choose_structure`; the record says which and why).
        ``subnetwork``: dense over the ``subnetwork_size`` weights of largest marginal variance under the diagonal
        Laplace approximation, :math:`\Sigma_S = (G_{SS} + \alpha P_S)^{-1}`, the rest at the MAP
        (:mod:`bnn.inference.laplace.subnetwork`).
    subnetwork_size : int, optional
        :math:`D_S`, the weights of ``structure="subnetwork"`` (only with it); ``None`` (the default):
        :data:`~bnn.inference.laplace.subnetwork.DEFAULT_SUBNETWORK_SIZE` (1000). Either is capped at the network's
        weights.
    tune_prior_precision : bool, optional
        Scale a Gaussian prior's precision by the :math:`\alpha` maximising the Laplace
        log marginal likelihood at :math:`\theta_{MAP}` (GGN only). ``None`` (the default): wherever that is
        possible (GGN, Gaussian priors on the covered weights), else not (``subnetwork``: by the evidence of the
        diagonal Laplace approximation over every weight, the one that chooses the subnetwork); ``True`` refuses
        where it is not. A network with ``layer-scale`` or ``ard`` priors has a precision per group set by the evidence instead
        (:mod:`bnn.inference.laplace.type2_scales`) and refuses ``True``.
    max_memory_gib : float
        Refuse, before any work, a structure whose curvature needs more memory than this.
    temperature : float
        The likelihood temperature :math:`T`, 1 (Bayes' posterior) by default. The Gaussian
        (:mod:`bnn.inference.core.temperature`) sits at the mode of
        :math:`\tfrac{1}{T}\log p(y \mid x, \theta) + \log p(\theta)` with precision :math:`H/T + P`, and the
        linearised predictive uses it. The prior precision stays as the prior gives it
        (a tempered likelihood has no evidence to tune it by), so :math:`T \ne 1` refuses ``tune_prior_precision=True``,
        ``structure="kron"``, hierarchical priors and a learned noise.
    link_approx : {"probit", "bridge"}
        How a classifier's linearised predictive turns the logits' Gaussian into class probabilities, laplace-torch's
        names (:mod:`bnn.inference.laplace.linearized`): the multi-class probit approximation, or the Laplace bridge
        (ten classes or any :math:`K \ge 2`; a binary network has one logit, and refuses it).
    num_samples : int
        Draws from :math:`q` kept in the :class:`~bnn.inference.core.posterior.Posterior` (the MC predictive and ArviZ
        use them).
    seed : int
        Seeds the MAP initialisation and the draws.
    progress : bool
        Show tqdm bars.
    """

    hessian: HessianType = option("ggn", choice(HessianType))
    structure: Structure | None = option(None, optional(choice(Structure)))
    subnetwork_size: int | None = option(None, optional(positive_int))
    tune_prior_precision: bool | None = option(None, optional(flag))
    max_memory_gib: float = option(2.0, positive_number)
    temperature: float = option(UNTEMPERED, parse_temperature)
    link_approx: LinkApprox = option("probit", choice(LinkApprox))
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        structure = self.structure
        if structure is None:  # the default's choice, as far as it is known without data (kron's support is not)
            full = required_bytes(Structure.FULL, parameters, 8) <= self.max_memory_gib * GIB
            structure = Structure.FULL if full or self.hessian is not HessianType.GGN else Structure.KRON
        random = self.subnetwork_weights(model) if structure is Structure.SUBNETWORK else (
            parameters - covered_from(model, structure))
        return peak_stage(self.map_fit_needs(model),
                          {f"the {structure.value} curvature (float64)": required_bytes(structure, random, 8, model),
                           f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)})

    def subnetwork_weights(self, model) -> int:
        """:math:`D_S` for ``model``: ``subnetwork_size`` or its default, at most the network's weights."""
        return min(self.subnetwork_size or DEFAULT_SUBNETWORK_SIZE, num_weights(model.sites))

    def check(self) -> None:
        if self.subnetwork_size is not None and self.structure is not Structure.SUBNETWORK:
            raise ValueError(f"subnetwork_size={self.subnetwork_size} sets the weights of structure='subnetwork'; pass "
                             "structure='subnetwork' with it, or leave subnetwork_size out")
        if self.structure is not None:
            check_combination(self.hessian, self.structure)
        if self.temperature != UNTEMPERED and self.tune_prior_precision:
            raise ValueError(f"temperature={self.temperature:g} keeps the prior precision as the prior gives it (a "
                             "tempered likelihood has no evidence to tune it by): leave tune_prior_precision out")
        if self.temperature != UNTEMPERED and self.structure is Structure.KRON:
            raise ValueError(f"structure='kron' is not tempered; with temperature={self.temperature:g} use "
                             "structure='full', 'diag' or 'last-layer'")
