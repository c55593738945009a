"""The layout of the compiled kernel's buffer and the codes it reads, apart from the kernel: laying a model out
(:mod:`bnn.inference.nuts.numba_potential`) and asking whether the kernel applies need them, not numba.

The buffer's first ``ints[N_INTS]`` words, viewed as int64, are a table describing the network: the fixed fields
below, then ``LAYER_FIELDS`` words per layer from ``LAYER_TABLE`` on. Each ``*_AT`` field is the offset of an array in
the buffer; ``W_PRIOR``/``B_PRIOR`` and ``LIKELIHOOD`` hold the codes below.
"""

from __future__ import annotations

import math

HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)

# The int64 table at the start of the buffer.
N_INTS, N_WORDS, ROWS, LAYERS, ACTIVATION, LIKELIHOOD, X_AT, Y_AT, TARGETS, NOISE_AT, LIKELIHOOD_AT, G_AT, G2_AT, DIM = \
    range(14)
LAYER_TABLE = 14  # then LAYER_FIELDS words per layer:
D_IN, D_OUT, W_AT, B_AT, A_AT, H_AT, SCRATCH_AT, W_PRIOR, W_PRIOR_AT, B_PRIOR, B_PRIOR_AT = range(11)
LAYER_FIELDS = 11

ACTIVATION_CODES = {"tanh": 0, "relu": 1, "sigmoid": 2, "softplus": 3, "elu": 4, "silu": 5, "gelu": 6}
PRIOR_NORMAL, PRIOR_LAPLACE, PRIOR_SCALE_MIXTURE = range(3)
GAUSSIAN, GAUSSIAN_LEARNED_NOISE, BERNOULLI, CATEGORICAL, HETEROSCEDASTIC = range(5)
