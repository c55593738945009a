"""The options of an SVGD fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bnn.inference.core.device import DeviceOptions
from pyro.infer import IMQSteinKernel, RBFSteinKernel
from pyro.infer.svgd import SteinKernel

from bnn.options import choice, flag, integer, option, optional, positive_number, seed
from bnn.runtime.memory import parameter_count, value_bytes


class KernelName(str, Enum):
    r"""Pyro's Stein kernels, each a product over the coordinates :math:`d` with bandwidths :math:`h_d`: the RBF
    :math:`k(x, x') = \exp(-\sum_d (x_d - x'_d)^2 / h_d)` (Liu and Wang 2016) or the inverse multi-quadric
    :math:`k(x, x') = \prod_d (1 + (x_d - x'_d)^2 / h_d)^{-1/2}` (Chen et al. 2018), whose heavier tails keep pushing
    particles that are far apart. The IMQ's constant is 1 (:data:`IMQ_ALPHA`)."""

    RBF = "rbf"
    IMQ = "imq"


IMQ_ALPHA = 1.0
r"""The IMQ kernel's constant :math:`\alpha` in :math:`(\alpha + (x_d - x'_d)^2 / h_d)^{-1/2}`. Pyro's default, 0.5,
makes each coordinate's factor :math:`\sqrt 2` at zero distance and the product :math:`2^{D/2}`: on toy1d's network
(:math:`D = 152`) the updates overflow Adam's second moment and the particles stop. At 1 every factor is at most 1."""


@dataclass(frozen=True)
class SVGDOptions(DeviceOptions):
    r"""Options of :func:`~bnn.inference.svgd.fit_svgd` (Liu and Wang 2016, by Pyro's ``SVGD``).

    Attributes
    ----------
    num_samples : int
        :math:`n`, the particles, at least 2: they are the posterior's draws. The kernel's tensors grow as
        :math:`n^2 D` for :math:`D` coordinates, and more particles need more steps (each one's pull is an average
        over the others): on toy1d 100 particles still fail their own check after 3,000 steps, where 50 pass.
    steps : int
        Full-batch SVGD steps; each evaluates the gradient of the log joint at every particle on every training row.
        The default, 3,000, was chosen on toy1d's network of 50 units at the other defaults: its particles pass their
        own check there, as they do not at 1,000 (their mean log joint still 4.4 nats up over the last tenth of the
        rate, 19 nats below where 3,000 steps take it). Settled particles are no better a predictive there: test
        log-likelihood 0.56 and 90% coverage 0.82 at 3,000 steps against 0.62 and 0.91 at 1,000, RBF SVGD's
        variance deficit in :math:`D = 152` coordinates showing as they settle.
    lr : float
        Adam's peak learning rate, decayed to zero along a cosine over the run. The default, 0.05, on toy1d: at 0.01
        the particles' mean log joint is still rising after 3,000 steps (3.9 nats over the last tenth of the rate,
        13 nats below where 0.05 takes it); at 0.2 the first steps throw them apart (after 1,000 steps, still 38 nats
        up and test log-likelihood 0.50 against 0.62 at 0.05).
    kernel : KernelName
        ``"rbf"``, or ``"imq"``, the default for a network with hierarchical priors: the RBF kernel's light tails
        leave the long tail of a scale's log posterior empty (a linear model's log-scale mean at -0.57 where the exact
        one is -1.75, 1.1 posterior standard deviations off; the IMQ kernel's at -1.90, 0.14 off).
    bandwidth_factor : float, optional
        A factor on the kernel's bandwidths :math:`h_d`, which Pyro sets at each step, coordinate by coordinate, to the
        median of the particles' squared pairwise distances in coordinate :math:`d` over :math:`\log(n + 1)`, and
        puts in one kernel of the whole vector, :math:`\exp(-\sum_d (x_d - x'_d)^2 / h_d)`. ``None``: :math:`D`,
        the number of coordinates, so that the exponent is the mean of the coordinates' terms: about Liu and Wang's
        median heuristic on the whole vector. At factor 1 the kernel is :math:`D` times too narrow and the particles
        underestimate the posterior's variance badly (to 0.28 of it on a 3-dimensional Gaussian, against 0.74 at the
        default, with 100 particles).
    seed : int
        Seeds the particles' start, drawn from the prior.
    progress : bool
        Show a tqdm bar.
    """

    num_samples: int = option(50, integer(minimum=2))
    steps: int = option(3000, integer(minimum=1))
    lr: float = option(0.05, positive_number)
    kernel: KernelName = option("rbf", choice(KernelName))
    bandwidth_factor: float | None = option(None, optional(positive_number))
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def stein_kernel(self, dim: int) -> SteinKernel:
        """Pyro's kernel of :attr:`kernel` for particles of ``dim`` coordinates, at :attr:`bandwidth_factor`."""
        factor = float(dim) if self.bandwidth_factor is None else self.bandwidth_factor
        if self.kernel is KernelName.RBF:
            return RBFSteinKernel(bandwidth_factor=factor)
        return IMQSteinKernel(alpha=IMQ_ALPHA, bandwidth_factor=factor)

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        return {f"{self.num_samples} particles and Adam's two moments (3 n D)":
                value_bytes(3 * self.num_samples * parameters),
                "the kernel's (n, n, D) differences, squares, log-kernels and gradients (4 n^2 D)":
                value_bytes(4 * self.num_samples**2 * parameters)}
