r"""What the collection's mean-field Gaussian guides share: every latent in one flat vector.

The latent sites of a :class:`~bnn.models.network.BayesianNetwork`'s program (its weight sites, then the latent
scales of its hierarchical priors and the likelihood's latents such as a learned noise ``sigma``, these in their
unconstrained space: the logarithm of a scale) are laid end to end in one vector :math:`z \in \mathbb{R}^D` with

.. math::

    q(z) = \prod_{k=1}^D \mathcal{N}(z_k; m_k, \sigma_k^2), \qquad
    \sigma_k = \operatorname{softplus}(\rho_k) = \ln(1 + e^{\rho_k}),

drawn in one reparameterised sample :math:`z = m + \sigma \odot \varepsilon`,
:math:`\varepsilon \sim \mathcal{N}(0, I)` (an auxiliary site, :class:`FlatDraw`) and
split into the model's sites, each a ``Delta`` at its value, masked (never scored: the
flat site's log-density carries the whole guide term). One draw and one parameter
tensor per step (rather than a distribution and two parameters per site) keeps the
JIT-compiled ELBO graph and the optimiser's work small (``benchmarks/results/svi_speed.md``).

Pyro's ELBO takes, per draw, :math:`\sum_\text{model sites}\log p - \sum_\text{guide sites}\log q`;
here the guide's only non-zero term is the flat site's log-density :math:`\ell(z)`, a sum
over the latents that each guide chooses for the KL it wants. A weight :math:`w_k` with

* :math:`\ell_k = \log q(w_k)` contributes :math:`\log p(w_k) - \log q(w_k)`: the Monte
  Carlo KL at the draw;
* :math:`\ell_k = \log p(w_k) + K_k` contributes exactly :math:`-K_k` (the prior terms
  cancel draw by draw, up to rounding), for any analytic :math:`K_k` (the closed-form
  Gaussian KL, the empirical-Bayes KL).

So analytic KL terms enter every public Pyro ELBO (``Trace_ELBO``, ``JitTrace_ELBO``,
vectorised particles) with no custom ELBO class. A constrained latent
:math:`\theta = T(z_k)` gets :math:`\ell_k = \log q(z_k) - \log|T'(z_k)|`, its Monte Carlo KL, whatever the weights
get: a learned noise, and the scales :math:`\xi` of a hierarchical prior (a half-Cauchy, with no closed-form KL
against a log-normal).

**Hierarchical priors** (:mod:`bnn.models.hierarchical_priors`). The program draws such a weight non-centred,
:math:`w_k = s_k(\xi)\, z_k` with :math:`z_k \sim \mathcal{N}(0, 1)` at the site ``<site>_decentered``; the guide
holds :math:`z_k` in the weight's place (its prior :math:`\mathcal{N}(0, 1)`, Gaussian: the closed-form KL applies to
it) and a Gaussian on each :math:`\log \xi_j`,

.. math::

    q(\xi, z) = \prod_j \mathcal{N}(\log\xi_j; m_j, \sigma_j^2) \prod_k \mathcal{N}(z_k; m_k, \sigma_k^2),

mean-field in the coordinates where NUTS and AutoNormal work too (no funnel between a scale and its weights).

Computing :math:`\log p(w_k)` twice only to cancel it costs time, so
:meth:`FlatNormalGuide.elbo_pair` gives SVI a pair that skips it: the model with those
sites' priors masked out (``mask(False)``: not evaluated at all) and the guide without the
:math:`\log p(w_k)` term. Per draw both pairs give the same ELBO (up to rounding).

Every guide instance has its own parameter names (``<Class>_<n>.<name>``), so two guides
alive in one process never share parameters through Pyro's global param store.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyro
import pyro.distributions as dist
import torch
from bnn.models.network import DECENTRED
from bnn.models.priors import GaussianPrior, Prior
from bnn.models.sites import WeightSite
from pyro.distributions import TorchDistribution, constraints
from pyro.distributions.transforms import biject_to
from pyro.nn import PyroModule, pyro_method
from pyro.poutine.messenger import Messenger
from torch.distributions.transforms import Transform

_INSTANCES = itertools.count()
STANDARDISED_PRIOR = GaussianPrior(1.0)
r"""The prior :math:`\mathcal{N}(0, 1)` of the standardised weights ``<site>_decentered`` of a hierarchical prior."""
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def normal_log_prob(z: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    r"""Elementwise :math:`\log\mathcal{N}(z; m, \sigma^2) = -\ln\sigma - \tfrac12((z - m)/\sigma)^2 - \tfrac12\ln 2\pi`."""
    return -torch.log(scale) - 0.5 * ((z - loc) / scale) ** 2 - _HALF_LOG_2PI


class FlatDraw(TorchDistribution):
    r"""The flat draw :math:`z = m + \sigma \odot \varepsilon`, scored by the guide's log-density :math:`\ell(z)`.

    ``log_density`` maps ``z`` of shape ``(*batch, D)`` to :math:`\ell(z)` of shape ``(*batch,)``.
    """

    arg_constraints = {}
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        log_density: Callable[[torch.Tensor], torch.Tensor],
        batch_shape: torch.Size = torch.Size(),
    ) -> None:
        self.loc, self.scale, self.log_density = loc, scale, log_density
        super().__init__(torch.Size(batch_shape), loc.shape[-1:], validate_args=False)

    def expand(self, batch_shape, _instance=None) -> FlatDraw:
        return FlatDraw(self.loc, self.scale, self.log_density, torch.Size(batch_shape))

    def rsample(self, sample_shape=torch.Size()) -> torch.Tensor:
        eps = torch.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + self.scale * eps

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return self.log_density(value)


class _UnscorePriors(Messenger):
    """Masks the priors of the sites ``names`` with ``mask(False)``: sampled as before, never scored."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names

    def _pyro_sample(self, msg) -> None:
        if msg["name"] in self.names:
            msg["fn"] = msg["fn"].mask(False)


@dataclass(frozen=True)
class Block:
    """One latent site's slice ``[start, stop)`` of the flat vector.

    ``transform`` maps the unconstrained block to the site's support; ``None`` marks a
    weight site (real-valued, its prior from the model's :class:`~bnn.models.priors.Prior`).
    """

    name: str
    start: int
    stop: int
    shape: torch.Size
    transform: Transform | None

    def take(self, flat: torch.Tensor) -> torch.Tensor:
        """This block of ``flat`` (``(*batch, D)``) shaped ``(*batch, *shape)``."""
        return flat[..., self.start : self.stop].reshape(flat.shape[:-1] + self.shape)


class FlatNormalGuide(PyroModule):
    r"""Base class: a mean-field Gaussian over every latent of ``model`` in one flat vector.

    The weights fill entries ``[0, num_weights)``, the other latents (the scales of hierarchical priors, then the
    likelihood's latents) the rest. Subclasses define :meth:`flat_parameters` (at least ``loc`` :math:`m` and ``scale``
    :math:`\sigma`, each of shape ``(D,)``), :meth:`weight_log_density` (the weights' part
    of :math:`\ell` without prior terms, see the module docstring) and set
    ``analytic_sites``, the weight sites whose KL it computes analytically.

    Parameters
    ----------
    model : BayesianNetwork
        The model; its priors are read now, so build a new guide after swapping them.
    """

    def __init__(self, model) -> None:
        name = f"{type(self).__name__}_{next(_INSTANCES)}"
        super().__init__(name=name)
        self.model = model
        self.priors = model.prior
        self.weight_sites, self.weight_priors = guide_weight_sites(model)
        latent_priors = model.non_weight_priors()
        blocks, start = [], 0
        for site in self.weight_sites.values():
            blocks.append(Block(site.name, start, start + site.numel, site.shape, None))
            start += site.numel
        for site_name, prior in latent_priors.items():
            shape = prior.event_shape
            blocks.append(Block(site_name, start, start + shape.numel(), shape, biject_to(prior.support)))
            start += shape.numel()
        self.blocks = {block.name: block for block in blocks}
        self.num_latents = start
        self.num_weights = sum(site.numel for site in model.sites)
        self.flat_site = f"_{name}_flat"
        self._latent_priors = latent_priors
        self._prior_distributions = {
            site_name: self.weight_priors[site_name].distribution(site).to_event(len(site.shape))
            for site_name, site in self.weight_sites.items()
        }
        self.analytic_sites: tuple[str, ...] = ()

    # ------------------------------------------------------------ subclass hooks
    def flat_parameters(self) -> dict[str, torch.Tensor]:
        """The current flat ``loc`` and ``scale`` (and whatever the subclass's KL needs)."""
        raise NotImplementedError

    def weight_log_density(self, z: torch.Tensor, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        r"""The weights' part of :math:`\ell(z)` for ``z`` of shape ``(*batch, D)``, broadcastable to
        ``(*batch,)``: :math:`\log q(w_k)` of Monte Carlo weights plus :math:`K_k` of analytic ones."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def flatten(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Site values (in their supports) as one unconstrained vector of length ``D``."""
        parts = []
        for block in self.blocks.values():
            value = torch.as_tensor(values[block.name]).detach().to(torch.get_default_dtype())
            parts.append((value if block.transform is None else block.transform.inv(value)).reshape(-1))
        return torch.cat(parts)

    def prior_start(self) -> dict[str, torch.Tensor]:
        r"""A start for every latent site: the weights drawn from their priors (a draw breaks the symmetry of the
        hidden units), each likelihood latent at its prior's median (its mean where the prior has no inverse CDF).

        A draw of the noise can be arbitrarily small, and SVI does not recover from a tiny one: the likelihood's
        :math:`\sum_n (y_n - f_n)^2 / 2\sigma^2` then dwarfs the rest of the ELBO, and the weights fit the data ever more
        closely instead of the noise growing (a HalfNormal(1) draw of :math:`6 \times 10^{-4}` ended a UCI fit there)."""
        start = {name: self.weight_priors[name].distribution(site).sample() for name, site in self.weight_sites.items()}
        start.update({name: prior_median(prior) for name, prior in self._latent_priors.items()})
        return start

    def log_density(self, z: torch.Tensor, params: Mapping[str, torch.Tensor], cancel_prior: bool) -> torch.Tensor:
        r""":math:`\ell(z)`, shaped ``(*batch,)``: the weights' part, :math:`\log p(w_s)` of the analytic
        sites when ``cancel_prior``, and :math:`\log q(z_k) - \log|T'(z_k)|` of the other latents."""
        batch = z.shape[:-1]
        total = self.weight_log_density(z, params)
        if cancel_prior:
            for name in self.analytic_sites:
                total = total + self._prior_distributions[name].log_prob(self.blocks[name].take(z))
        w = self.num_weights
        if self.num_latents > w:
            total = total + normal_log_prob(z[..., w:], params["loc"][w:], params["scale"][w:]).sum(-1)
        for block in self.blocks.values():
            if block.transform is not None:
                unconstrained = block.take(z)
                log_det = block.transform.log_abs_det_jacobian(unconstrained, block.transform(unconstrained))
                total = total - log_det.reshape(batch + (-1,)).sum(-1)
        return total.expand(batch)

    @pyro_method
    def site_loc_scale(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """:math:`(m, \\sigma)` of every site, shaped like the site (unconstrained space for non-weights)."""
        params = self.flat_parameters()
        return {name: (block.take(params["loc"]), block.take(params["scale"])) for name, block in self.blocks.items()}

    # ---------------------------------------------------------------- the guide
    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None, *, cancel_prior: bool = True
    ):
        r"""Draw every latent site; the model's signature, ``x``, ``y`` and ``num_data`` unused.

        ``cancel_prior=False`` leaves :math:`\log p(w_s)` of the analytic sites out of
        :math:`\ell`, for a model that does not score them (:meth:`elbo_pair`).
        """
        if self.model.prior != self.priors:
            raise ValueError(
                f"the model's prior changed after {type(self).__name__} was built; build a new guide "
                "(its KL terms follow the prior it was built with)"
            )
        params = self.flat_parameters()
        draw = FlatDraw(params["loc"], params["scale"], lambda z: self.log_density(z, params, cancel_prior))
        z = pyro.sample(self.flat_site, draw, infer={"is_auxiliary": True})
        values = {}
        for name, block in self.blocks.items():
            value = block.take(z)
            if block.transform is not None:
                value = block.transform(value)
            values[name] = pyro.sample(name, dist.Delta(value, event_dim=len(block.shape)).mask(False))
        return values

    def elbo_pair(self):
        """The model and guide SVI optimises: the ELBO of (model, guide), without evaluating the
        priors of the analytic sites (the model leaves them unscored, the guide does not cancel them)."""
        model = self.model

        def elbo_model(x, y=None, num_data=None):
            with _UnscorePriors(self.analytic_sites):
                return model(x, y, num_data)

        def elbo_guide(x, y=None, num_data=None):
            return self(x, y, num_data, cancel_prior=False)

        return elbo_model, elbo_guide


def guide_weight_sites(model) -> tuple[dict[str, WeightSite], dict[str, Prior]]:
    r"""The weight sites of ``model``'s program and their priors, by name: each weight site with its prior, and in
    place of a weight of a hierarchical prior its standardised site ``<site>_decentered``, whose prior is
    :math:`\mathcal{N}(0, 1)` (the weight is :math:`w_k = s_k(\xi) z_k`, a deterministic site of the program)."""
    hierarchical = model.hierarchical_sites
    sites, priors = {}, {}
    for site in model.sites:
        if site.name in hierarchical:
            site = dataclasses.replace(site, name=site.name + DECENTRED)
            priors[site.name] = STANDARDISED_PRIOR
        else:
            priors[site.name] = model.prior[site.name]
        sites[site.name] = site
    return sites, priors


def check_finite(name: str, value) -> float:
    """``value`` as a float, or ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def prior_median(prior) -> torch.Tensor:
    """The median of ``prior`` entry by entry (its inverse CDF at 1/2, that of its base for independent entries such
    as an ARD prior's relevances), or its mean where it has no inverse CDF."""
    base = prior.base_dist if isinstance(prior, dist.Independent) else prior
    try:
        median = base.icdf(torch.tensor(0.5))
    except NotImplementedError:
        return prior.mean
    return median.expand(prior.batch_shape + prior.event_shape)
