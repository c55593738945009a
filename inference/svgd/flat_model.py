r"""The model as Pyro's ``SVGD`` needs it: every latent site in one flat vector per particle.

Pyro's SVGD packs its particles as :class:`~pyro.infer.autoguide.AutoContinuous` packs a latent vector, site by site
(every particle's values of the first site, then of the second, ...), and reads them back as
``particles.reshape(num_particles, -1)``, particle by particle. The two orders agree for a model of one latent site
only: with several, each row it reads mixes the coordinates of several particles, the kernel compares the wrong
vectors, and the particles' correlations come out wrong (on the conjugate test model, correlations of 0.6 to 0.9 where
the posterior's are 0.25). So SVGD is given :class:`FlatLatents`'s program: one site :data:`FLAT_SITE` of all the
model's latent sites (:attr:`~bnn.models.network.BayesianNetwork.program_latent_shapes`) in Pyro's unconstrained
coordinates, :math:`u \in \mathbb{R}^D`, mapped to each site's support by ``biject_to`` and scored by the model itself
(each site conditioned on its value, so that its prior is counted as an observation), with the log-Jacobian of the
maps as a factor: its log density is the model's log joint in :math:`u`, as Pyro's automatic guides see it. The flat
site's own density is masked out (it only gives the prototype its shape).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch
from bnn.models.network import MAX_PLATE_NESTING
from pyro import poutine
from torch.distributions import Transform, biject_to

FLAT_SITE = "svgd_latents"
"""The one latent site of the program SVGD fits."""
PARTICLES = "svgd_particles"
"""The parameter in which Pyro's SVGD keeps its particles, packed as ``(num_particles * D,)``."""


@dataclass(frozen=True)
class FlatLatents:
    """The latent sites of a network as one flat vector :math:`u`, site by site in the program's order.

    Attributes
    ----------
    model : BayesianNetwork
        The network.
    shapes : dict of str to tuple of int
        Each latent site's shape, by name (:attr:`~bnn.models.network.BayesianNetwork.program_latent_shapes`).
    transforms : dict of str to Transform
        Each site's map from :math:`\\mathbb{R}` to its support (``biject_to``), which keeps the shape.
    """

    model: object
    shapes: dict[str, tuple[int, ...]]
    transforms: dict[str, Transform]

    @classmethod
    def of(cls, model, x: torch.Tensor, y: torch.Tensor) -> FlatLatents:
        """The flat coordinates of ``model``'s latent sites, their supports read from one run of its program on
        ``(x, y)``."""
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            trace = poutine.trace(model).get_trace(x, y)
        shapes = {name: tuple(shape) for name, shape in model.program_latent_shapes.items()}
        return cls(model, shapes, {name: biject_to(trace.nodes[name]["fn"].support) for name in shapes})

    @property
    def dim(self) -> int:
        """:math:`D`, the entries of :math:`u`."""
        return sum(math.prod(shape) for shape in self.shapes.values())

    def values(self, flat: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        r"""Each site's value ``(*lead, *shape)`` at ``flat`` :math:`u` ``(*lead, D)``, and the log-Jacobian
        :math:`\log\lvert\partial x / \partial u\rvert` of the maps ``(*lead,)``."""
        values, log_jacobian, start = {}, flat.new_zeros(flat.shape[:-1]), 0
        for name, shape in self.shapes.items():
            size = math.prod(shape)
            unconstrained = flat[..., start:start + size].reshape(flat.shape[:-1] + shape)
            values[name] = self.transforms[name](unconstrained)
            jacobian = self.transforms[name].log_abs_det_jacobian(unconstrained, values[name])
            log_jacobian = log_jacobian + jacobian.reshape(flat.shape[:-1] + (-1,)).sum(-1)
            start += size
        return values, log_jacobian

    def program(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The Pyro program ``program(x, y)`` of :data:`FLAT_SITE` (module notes)."""

        def program(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            flat = pyro.sample(FLAT_SITE, dist.Normal(x.new_zeros(self.dim), 1.0).to_event(1).mask(False))
            values, log_jacobian = self.values(flat)
            pyro.factor("svgd_log_jacobian", log_jacobian)
            return poutine.condition(self.model, data=values)(x, y)

        return program

    def prior_particles(self, x: torch.Tensor, y: torch.Tensor, count: int) -> torch.Tensor:
        """``count`` draws of :math:`u` from the model's prior, packed particle by particle as :data:`PARTICLES`
        holds them: ``(count * D,)``."""
        with torch.no_grad(), pyro.plate("particles", count, dim=-MAX_PLATE_NESTING - 1):
            trace = poutine.trace(self.model).get_trace(x, y)
        pieces = [self.transforms[name].inv(trace.nodes[name]["value"]).reshape(count, -1) for name in self.shapes]
        return torch.cat(pieces, dim=-1).reshape(-1)

