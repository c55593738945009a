"""What a run's numbers depend on besides the code, the data and the seed: torch's version and the CPU kernels it runs.

torch picks its CPU kernels when it loads, from what the processor offers (``torch.backends.cpu.get_cpu_capability()``:
``"AVX512"``, ``"AVX2"``, ``"DEFAULT"`` for the scalar ones; the environment variable ``ATEN_CPU_CAPABILITY`` sets it).
Kernels of different widths sum in different orders, so their floats differ in the last bits. A fit seeded the same
gives the same numbers on one machine; on another, a long chain (SG-MCMC) can amplify those bits into a different
run of the same sampler. A result file that names the kernels says which machines its numbers can be
compared with to the digit.
"""

from __future__ import annotations

import platform

import torch


def machine() -> dict[str, str]:
    """torch's version, its CPU kernels (module notes) and the processor's architecture, as strings."""
    return {"torch": torch.__version__, "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
            "architecture": platform.machine()}
