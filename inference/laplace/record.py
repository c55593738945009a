"""What a Laplace fit records: the MAP's convergence, the curvature used and the Laplace evidence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bnn.inference.laplace.linearized import Linearization, is_linearizable
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.map_search.advice import NO_MAXIMUM_FIX
from bnn.inference.map_search.map_record import MapFitRecord


@dataclass(kw_only=True)
class LaplaceRecord(MapFitRecord):
    r"""The record of :func:`~bnn.inference.laplace.fit_laplace`.

    Attributes
    ----------
    options : LaplaceOptions
        The options it ran with (``hessian``: the likelihood curvature; ``structure``: the entries of the precision
        kept).
    map_seconds : float
        Wall time of the MAP fit (Adam, then the polish; with the evidence search's refits when tuned, or with the
        rounds that set the type-II scales of hierarchical priors).
    num_weights_covered : int
        Weights with a Gaussian posterior (the rest, outside ``structure``, are held at the MAP); for ``subnetwork``
        the subnetwork's size :math:`D_S`.
    subnetwork_indices : list of int, optional
        For ``structure="subnetwork"``, the positions in the flat weight vector
        (:mod:`bnn.guides.flat_weights`) of the subnetwork's weights, increasing
        (:mod:`bnn.inference.laplace.subnetwork`); ``None`` otherwise.
    structure : str
        The structure of :math:`\Lambda` used: the one chosen when ``options.structure`` is ``None``, else (and when
        left out) ``options.structure``.
    structure_reason : str
        Why: ``"given"``, or the memory the full GGN needs against ``max_memory_gib`` for a structure chosen by
        default (:func:`~bnn.inference.laplace.default_structure.choose_structure`).
    map_lbfgs_iterations, map_grad_norm, map_converged, noise
        How the MAP fit ended (:class:`~bnn.inference.map_search.map_record.MapFitRecord`).
    log_marginal_likelihood : float
        The Laplace estimate of :math:`\log p(\mathcal{D})` (for ``subnetwork``, with the other weights held at the
        MAP: the subnetwork's alone, as laplace-torch's ``SubnetLaplace`` reports it).
    prior_precision : dict of str to float, optional
        The prior precision per covered site with a Gaussian prior, after the multiplier.
    prior_precision_multiplier : float
        :math:`\alpha` of :math:`P \to \alpha P` (1 unless tuned).
    tune_prior_precision : bool
        Whether :math:`\alpha` (and a learned noise, ``noise``) maximised the evidence
        (:mod:`bnn.inference.curvature.evidence`).
    evidence_rounds : int, optional
        Evaluations of the search for the evidence's maximum (:mod:`bnn.inference.curvature.evidence_search`), when
        the evidence chose :math:`\alpha` or the noise: MAP refits, or evaluations at the MAP held fixed
        (``evidence_refits``).
    evidence_converged : bool, optional
        Whether that search found a maximum.
    evidence_refits : bool, optional
        Whether the search over :math:`\alpha` refitted the MAP at each candidate (``True``) or held it fixed
        (``False``: :mod:`bnn.inference.laplace.posthoc_precision`); ``None`` when :math:`\alpha` was not tuned.
    hierarchical_scales : dict, optional
        For a network with ``layer-scale`` or ``ard`` priors, the prior standard deviation of each group of weights at
        its type-II maximum: ``{"layers.1": 0.8}`` for a layer scale; ``{"layers.0.weight": [one per input column],
        "layers.0.bias": 0.5}`` for ARD. The scales are set to the maximum of the Laplace evidence, not integrated
        (:mod:`bnn.inference.laplace.type2_scales`); the scale sites' values (``layers.0.scale``,
        ``layers.0.relevance``) are the posterior's constants and constant draws. ``None`` without such priors.
    hierarchical_scales_method : str, optional
        That sentence, for readers of the record.
    type2_rounds : int, optional
        The fixed-point rounds (MAP refits) that set them.
    type2_converged : bool, optional
        Whether those rounds reached the fixed point.
    """

    map_seconds: float
    options: LaplaceOptions
    num_weights_covered: int
    subnetwork_indices: list[int] | None = None
    structure: str | None = None
    structure_reason: str = "given"
    log_marginal_likelihood: float
    prior_precision: dict[str, float] | None = None
    prior_precision_multiplier: float
    tune_prior_precision: bool
    evidence_rounds: int | None = None
    evidence_converged: bool | None = None
    evidence_refits: bool | None = None
    hierarchical_scales: dict[str, float | list[float]] | None = None
    hierarchical_scales_method: str | None = None
    type2_rounds: int | None = None
    type2_converged: bool | None = None

    def __post_init__(self) -> None:
        if self.structure is None and self.options.structure is not None:
            self.structure = self.options.structure.value

    def problems(self) -> list[str]:
        unsettled = [f"the evidence search found no maximum in {self.evidence_rounds} MAP fits (prior precision "
                     f"multiplier {self.prior_precision_multiplier:.4g}, noise {self.noise}): {NO_MAXIMUM_FIX}"]
        unsettled_scales = [f"the type-II scales of the hierarchical priors did not settle in {self.type2_rounds} "
                            "fixed-point rounds: they are where the rounds stopped, not the evidence's maximum"]
        return (super().problems() + (unsettled if self.evidence_converged is False else [])
                + (unsettled_scales if self.type2_converged is False else []))

    def metrics(self) -> dict[str, Any]:
        return {"hessian": self.options.hessian.value, "structure": self.structure,
                "map_grad_norm": self.map_grad_norm, "map_converged": self.map_converged,
                "log_marginal_likelihood": self.log_marginal_likelihood}

    def load_linearization(self, path: Path, model) -> Linearization | None:
        """The linearised predictive saved at ``path`` by :meth:`~bnn.inference.core.posterior.Posterior.save`; ``None``
        for a likelihood without one.

        Raises
        ------
        ValueError
            When ``path`` is missing for a likelihood that has one: the folder would predict by sampling the weights
            instead, far wider, with nothing saying so.
        """
        if not is_linearizable(model.likelihood):
            return None
        if not path.is_file():
            raise ValueError(f"{path} is missing: this Laplace fit predicts through its linearised predictive, which the "
                             "file holds; the folder is damaged: fit and save the posterior again")
        return Linearization.load(path, model, self.options.link_approx.value)
