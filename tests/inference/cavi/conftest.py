"""The CAVI tests' regression problem (:func:`tests.support.cavi.regression_problem`) as a fixture."""

from __future__ import annotations

import pytest
import torch
from bnn.inference.cavi import NormalGammaPrior

from tests.support.cavi import regression_problem


@pytest.fixture
def problem() -> tuple[torch.Tensor, torch.Tensor, NormalGammaPrior]:
    return regression_problem()
