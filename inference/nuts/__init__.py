"""The No-U-Turn sampler: Markov chains of the exact posterior (:func:`fit_nuts`), run by pluggable engines."""

from bnn.inference.nuts.fit import fit_nuts

__all__ = ["fit_nuts"]
