"""The machine a result names (:mod:`bnn.runtime.machine`): torch's version and the CPU kernels it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.subprocess

NAMED = "import json; from bnn.runtime.machine import machine; print(json.dumps(machine()))"


@pytest.mark.parametrize(("forced", "named"), [("default", "DEFAULT"), ("avx2", "AVX2")])
def test_the_kernels_torch_is_made_to_run_are_the_ones_named(forced, named):
    if forced == "avx2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this processor has no AVX2: torch runs the widest kernels it has")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": forced}
    result = subprocess.run([sys.executable, "-c", NAMED], env=env, capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(result.stdout)
    assert found["cpu_kernels"] == named and found["torch"] == torch.__version__ and found["architecture"]
