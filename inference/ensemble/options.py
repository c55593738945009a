"""The options of a deep ensemble, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.map_search.map_options import MapFitOptions
from bnn.inference.map_search.map_starts import MemberMethod, member_workers

from bnn.options import choice, flag, integer, option, seed
from bnn.runtime.memory import parameter_count, value_bytes


@dataclass(frozen=True)
class MemberOptions(MapFitOptions):
    r"""Options of the methods whose members each start from their own MAP fit (the deep ensemble, MultiSWAG): the
    MAP fit's (:class:`~bnn.inference.map_search.map_options.MapFitOptions`) and

    Attributes
    ----------
    num_members : int
        :math:`M`, the members, each from its own MAP fit.
    member_method : {"auto", "parallel", "sequential"}
        See :class:`~bnn.inference.map_search.map_starts.MemberMethod`: where the members' MAP fits run.
    """

    num_members: int = option(5, integer(minimum=1))
    member_method: MemberMethod = option("auto", choice(MemberMethod))

    def workers(self) -> int:
        """The worker processes the members' MAP fits run in (1: in this process)."""
        return member_workers(self.member_method, self.num_members)

    def member_fit_needs(self, model) -> dict[str, int]:
        """The memory of the MAP fits that run at once."""
        return self.map_fits_needs(model, self.workers(), "members")


@dataclass(frozen=True)
class EnsembleOptions(MemberOptions):
    r"""Options of :func:`~bnn.inference.ensemble.fit_ensemble`: those of :class:`MemberOptions` and

    Attributes
    ----------
    num_members : int
        :math:`M`, the MAP fits (>= 2; one is a MAP estimate, not an ensemble); 5, the paper's choice.
    seed : int
        Seeds the member seeds (``numpy.random.SeedSequence(seed)``): the same seed gives the same members.
    progress : bool
        Show a tqdm bar over the members.
    """

    num_members: int = option(5, integer(minimum=2))
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        return {**self.member_fit_needs(model),
                f"{self.num_members} members' weights (float64)":
                value_bytes(self.num_members * parameter_count(model), torch.float64)}
