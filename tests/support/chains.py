"""Posteriors made from given chains, diagnosed as NUTS's own are, for tests of what reads a fit's draws."""

from __future__ import annotations

import numpy as np
from bnn.inference import Posterior
from bnn.inference.diagnostics.convergence import chain_diagnostics
from bnn.inference.nuts import NUTSOptions, NUTSRecord


def chains_posterior(model, samples, x, y) -> Posterior:
    """A NUTS-like posterior of the chains ``samples`` ``(chains, draws, ...)``, diagnosed as ``fit_nuts`` does."""
    chains, draws = next(iter(samples.values())).shape[:2]
    diagnostics = chain_diagnostics(model, samples, x, np.zeros((chains, draws), dtype=bool))
    record = NUTSRecord(seed=0, train_seconds=0.0, options=NUTSOptions(num_warmup=0, num_samples=draws, engine="pyro"),
                        num_chains=chains, init="prior", chain_method="sequential", potential="trace",
                        chain_seeds=[0] * chains, chain_seconds=[0.0] * chains,
                        chain_gradients=[0] * chains, gradient_evaluations=0, diagnostics=diagnostics,
                        chains_kept=list(range(chains)))
    return Posterior(model, samples, x, y, record)
