"""arviz, scikit-learn, nutpie, numba, pandas and scipy's stats and fft are imported at their first use, not with the
package (every worker process of chains, members and cells imports it), and arviz is configured then: quiet about its
refactor, on its NumPy paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.subprocess

SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("always")
    caught = []
    warnings.showwarning = lambda message, category, *args, **kwargs: caught.append(str(message))
    import bnn.inference
    imported = sorted(name for name in ("arviz", "sklearn", "nutpie", "numba", "pandas", "scipy.stats", "scipy.fft")
                      if name in sys.modules)
    filters = [repr(f) for f in warnings.filters]
    from bnn.runtime.lazy_arviz import az
    az.InferenceData  # the first attribute read imports arviz
    import arviz
    print(json.dumps({"imported with the package": imported, "numba": bool(arviz.Numba.numba_flag),
                      "warnings": caught, "filters kept": filters == [repr(f) for f in warnings.filters]}))
    """
)


def test_the_package_leaves_arviz_sklearn_nutpie_numba_pandas_and_scipy_stats_to_their_first_use(tmp_path):
    # arviz announces its refactor once a day, remembered under the user's cache: an empty cache makes this the first
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {"imported with the package": [], "numba": False, "warnings": [], "filters kept": True}
