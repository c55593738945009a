r"""How the chains of a NUTS run ended, and the draws that survive a failed chain or an interrupt.

Each chain finishes (all ``num_samples`` draws), fails (an exception in its engine or worker:
it gives nothing and the other chains go on), or is stopped by an interrupt (Ctrl-C or SIGTERM in
the parent, ``KeyboardInterrupt`` and ``KeyboardInterrupt("SIGTERM")``, which stop the workers at their
next iteration): the nutpie engine then hands back
the draws it made after warmup (:class:`ChainInterrupted`), the Pyro engine none.

A posterior needs chains of one length, so :meth:`ChainOutcomes.resolve` keeps the chains
with at least :math:`L` draws, each cut to its first :math:`L`, for the :math:`L` that keeps
the most draws,

.. math::

    L = \arg\max_{L \in \{n_c\}} \; L \cdot \big|\{c : n_c \ge L\}\big| \quad\text{(on a tie, the smaller } L
    \text{, which keeps more chains)},

where :math:`n_c` counts chain :math:`c`'s draws: finished chains are kept whole unless partial
ones together hold more.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any

from bnn.inference.diagnostics.convergence import IncompleteSamplingWarning
from bnn.inference.nuts.chain import ChainDraws


class ChainInterrupted(Exception):
    """A chain stopped before its last draw; ``draws`` holds its draws after warmup so far, or ``None``."""

    def __init__(self, chain: int, draws: ChainDraws | None) -> None:
        super().__init__(chain, draws)  # the arguments rebuild it when it crosses from a worker process
        self.chain, self.draws = chain, draws

    def __str__(self) -> str:
        return f"chain {self.chain} was interrupted"


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


@dataclass
class ChainOutcomes:
    """What each chain of a run gave.

    Attributes
    ----------
    num_chains, num_samples : int
        What the run asked for.
    draws : dict of int to ChainDraws
        The draws of every chain that finished, or was interrupted after some draws.
    failures : dict of int to BaseException
        The error of every chain that failed.
    interrupt : BaseException or None
        The ``KeyboardInterrupt`` that stopped the run, if one did (its message says ``SIGTERM`` for that signal).
    """

    num_chains: int
    num_samples: int
    draws: dict[int, ChainDraws] = field(default_factory=dict)
    failures: dict[int, BaseException] = field(default_factory=dict)
    interrupt: BaseException | None = None

    def resolve(self, min_draws: int) -> tuple[list[ChainDraws], dict[str, Any]]:
        """The chains to keep, in chain order and of one length, and the entries for ``posterior.info``:
        ``chains_kept``, and ``incomplete`` with ``incomplete_reason`` after an interrupt, ``failed_chains``
        (chain to error) after failures. Warns with :class:`IncompleteSamplingWarning` when draws are missing.

        Raises
        ------
        KeyboardInterrupt
            The interrupt, again, when it came before any chain had ``min_draws`` draws.
        Exception
            The first chain's error when every chain failed.
        """
        lengths = {chain: len(next(iter(draws.stats.values()))) for chain, draws in self.draws.items()}
        candidates = sorted({n for n in lengths.values() if n >= min_draws})
        if not candidates:
            if self.interrupt is not None:
                raise self.interrupt
            raise self.failures[min(self.failures)]
        length = max(candidates, key=lambda n: (n * sum(m >= n for m in lengths.values()), -n))
        kept = sorted(chain for chain, n in lengths.items() if n >= length)
        chains = [dataclasses.replace(self.draws[chain], samples={k: v[:length] for k, v in self.draws[chain].samples.items()},
                                      stats={k: v[:length] for k, v in self.draws[chain].stats.items()}) for chain in kept]
        info: dict[str, Any] = {"chains_kept": kept}
        problems = []
        if self.failures:
            info["failed_chains"] = {str(chain): _describe(error) for chain, error in sorted(self.failures.items())}
            problems += [f"chain {chain} failed ({text})" for chain, text in info["failed_chains"].items()]
        if self.interrupt is not None:
            info["incomplete"] = True
            cause = _describe(self.interrupt) if str(self.interrupt) else type(self.interrupt).__name__
            info["incomplete_reason"] = (f"interrupted ({cause}); kept chains {kept} with "
                                         f"{length} of {self.num_samples} draws each")
            problems.append(info["incomplete_reason"])
        if problems:
            warnings.warn(f"NUTS returns fewer draws than asked ({self.num_chains} chains x {self.num_samples}): "
                          + "; ".join(problems) + ". See posterior.record.", IncompleteSamplingWarning, stacklevel=5)
        return chains, info
