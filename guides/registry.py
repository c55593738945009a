"""Guide factories by name, and the rule that turns a user's ``guide=`` into a guide.

A *guide factory* takes a model and keyword options and returns a Pyro guide callable
with the model's signature ``guide(x, y=None, num_data=None)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pyro.infer.autoguide import AutoGuide

from bnn.registry import Registry


class GuideFactory:
    """Marks ``build(model, **options) -> guide`` as a factory (not itself a guide)."""

    def __init__(self, build: Callable[..., Callable], *, description: str, compiles: bool = True) -> None:
        self.build = build
        self.description = description
        self.compiles = compiles
        self.__doc__ = build.__doc__

    def options(self) -> list[str]:
        """The keyword options ``build`` takes after the model."""
        parameters = list(inspect.signature(self.build).parameters.values())[1:]
        return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def __call__(self, model, **options: Any) -> Callable:
        """Build the guide of ``model``; an option ``build`` does not take is a ``ValueError`` naming the ones it does."""
        unknown = sorted(set(options) - set(self.options()))
        if unknown:
            raise ValueError(f"guide {self.build.__name__!r} takes no option(s) {unknown}; it takes {self.options()}")
        return self.build(model, **options)

    def __repr__(self) -> str:
        return f"GuideFactory({self.build.__name__}: {self.description})"


GUIDES: Registry[GuideFactory] = Registry("guide")


def register_guide(name: str, *, description: str, compiles: bool = True):
    """Decorator registering ``build(model, **options)`` as the guide factory ``name``; ``compiles=False`` for a guide
    Pyro's compiled ELBO (``JitTrace_ELBO``) cannot run, which SVI then runs without JIT."""

    def decorate(build):
        GUIDES.register(name, GuideFactory(build, description=description, compiles=compiles))
        return build

    return decorate


def build_guide(spec, model, **options: Any) -> tuple[Callable, str]:
    """Turn ``spec`` into a guide for ``model``; return the guide and a name for reports.

    ``spec`` may be a registered name, a :class:`GuideFactory`, an ``AutoGuide``
    subclass (called as ``cls(model, **options)``), or a ready guide callable (then
    ``options`` must be empty).
    """
    if isinstance(spec, str):
        return GUIDES.get(spec)(model, **options), spec
    if isinstance(spec, GuideFactory):
        return spec(model, **options), GUIDES.name_of(spec) or spec.build.__name__
    if isinstance(spec, type) and issubclass(spec, AutoGuide):
        return spec(model, **options), spec.__name__
    if callable(spec):
        if options:
            raise ValueError(f"guide options {sorted(options)} were given with a ready guide; "
                             "pass options only with a guide name or factory")
        return spec, getattr(spec, "__name__", type(spec).__name__)
    raise ValueError(f"guide must be a name in {GUIDES.names()}, a GuideFactory, an AutoGuide class "
                     f"or a guide callable; got {spec!r}")
