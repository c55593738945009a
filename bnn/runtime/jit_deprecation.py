"""torch's deprecation of TorchScript, ignored where the collection's own calls meet it.

torch 2.13 warns on every ``torch.jit.trace`` (and ``script_method``) that TorchScript is deprecated in
favour of ``torch.compile``. Pyro compiles with it (``JitTrace_ELBO`` for SVI's ``jit=True``, NUTS's
``jit_compile`` on the Pyro engine) and so does the TorchScript backend of the NUTS potential; the warning
names none of these and the user can do nothing about it. :func:`torch_jit_deprecation_ignored` ignores that
one warning, by its message and category, around those calls only.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

TORCH_JIT_DEPRECATION = r"`torch\.jit\.(trace|script_method)` is deprecated"


@contextmanager
def torch_jit_deprecation_ignored() -> Iterator[None]:
    """Run the block with torch's TorchScript ``DeprecationWarning`` (:data:`TORCH_JIT_DEPRECATION`) ignored."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TORCH_JIT_DEPRECATION, category=DeprecationWarning)
        yield
