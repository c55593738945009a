"""The continual methods by name: each learns one task of a :class:`~bnn.inference.continual.setup.ContinualSetup`
from what it carried out of the last one, and leaves a :class:`~bnn.inference.continual.learned.Learned`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bnn.inference.continual.bayesian import online_laplace, vcl, vcl_coreset
from bnn.inference.continual.bgd import bgd
from bnn.inference.continual.learned import Learned
from bnn.inference.continual.map_training import finetune, joint
from bnn.inference.continual.setup import ContinualSetup
from bnn.inference.continual.ucl import ucl

from bnn.registry import Registry

CONTINUAL_METHODS: Registry[Callable[[ContinualSetup, int, dict[str, Any]], Learned]] = Registry("continual method")
CONTINUAL_METHODS.register("vcl", vcl)
CONTINUAL_METHODS.register("vcl-coreset", vcl_coreset)
CONTINUAL_METHODS.register("online-laplace", online_laplace)
CONTINUAL_METHODS.register("ucl", ucl)
CONTINUAL_METHODS.register("bgd", bgd)
CONTINUAL_METHODS.register("finetune", finetune)
CONTINUAL_METHODS.register("joint", joint)
