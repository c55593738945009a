r"""Bayes by Backprop (Blundell et al. 2015): a mean-field Gaussian guide with softplus scales.

.. math::

    q(w) = \prod_k \mathcal{N}(w_k; \mu_k, \sigma_k^2), \qquad
    \sigma_k = \operatorname{softplus}(\rho_k) = \ln(1 + e^{\rho_k}), \qquad
    w = \mu + \sigma \odot \varepsilon,\ \varepsilon \sim \mathcal{N}(0, I),

fitted by minimising :math:`\mathrm{KL}(q \,\|\, p) - \mathbb{E}_q[\log p(\mathcal{D} \mid w)]`,
the KL in closed form or by Monte Carlo (:mod:`bnn.guides.kl`), the expectation by
reparameterised draws. All weights live in one flat :math:`\mu` and one flat :math:`\rho`,
the two rows of the parameter ``loc_rho`` (:mod:`bnn.guides.flat_normal`); a likelihood latent
such as a learned noise ``sigma``, and the latent scales of a hierarchical prior, are Gaussian in their unconstrained
space (log-normal) with a Monte Carlo KL, the weights of a hierarchical prior Gaussian in their standardised
coordinates :math:`z_k = w_k / s_k(\xi)` (prior :math:`\mathcal{N}(0, 1)`). In SVI the model does not evaluate the
Gaussian priors of closed-form sites at all (:meth:`~bnn.guides.flat_normal.FlatNormalGuide.elbo_pair`).

Local reparameterisation (Kingma, Salimans & Welling 2015): given a layer's input
:math:`h`, each pre-activation :math:`a = h W^\top + b` under :math:`q` is Gaussian,

.. math::

    a_{nj} \sim \mathcal{N}\Big(\sum_i h_{ni}\mu_{ji} + \mu_j,\ \sum_i h_{ni}^2\sigma_{ji}^2 + \sigma_j^2\Big),

independent over examples :math:`n` and units :math:`j`. Sampling :math:`a` instead of
:math:`W` gives every example its own noise: each example's expected log-likelihood, and
so the expected ELBO and its gradient, are unchanged, while the gradient's variance drops
(the noise is no longer shared by the whole batch). The likelihood then uses no weight
draw, so the KL must be the closed form: the option needs a Gaussian prior on every weight. A convolution's
outputs are drawn the same way, the sums running over each output position's patch
(:func:`bnn.models.layers.local_reparameterisation`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from bnn.guides.flat_normal import FlatNormalGuide, check_finite, normal_log_prob
from bnn.guides.kl import KLEstimator, gaussian_kl, site_estimators
from bnn.guides.registry import register_guide
from bnn.models.layers import LayerGaussian, local_reparameterisation, sites_outside_layers
from pyro.nn import PyroParam, pyro_method

INIT_LOCS = ("prior", "small")
"""The ``init_loc`` names the guide takes; SVI also takes ``"map"`` and passes the MAP weights as a mapping."""
SMALL_INIT_SD = 0.1


@register_guide("meanfield", description="Bayes by Backprop: mean-field Gaussian, softplus scales, closed-form or MC KL")
class MeanFieldGuide(FlatNormalGuide):
    r"""The Bayes-by-Backprop guide of ``model``.

    Parameters
    ----------
    model : BayesianNetwork
        The model (its priors are read now: build a new guide after swapping them).
    init_loc : {"prior", "small"} or mapping
        Initial :math:`\mu`: a draw from the prior (breaks the symmetry of hidden units),
        ``"small"`` draws :math:`\mathcal{N}(0, 0.1^2)`, or a mapping from site names to values
        with the other sites drawn from the prior. A likelihood latent (``sigma``) starts at its
        prior's median unless the mapping gives it (a draw can be so small that SVI never recovers).
        SVI (``fit``, and ``--guide-option init_loc=map`` on the command line) also takes ``"map"``:
        it fits the MAP weights on the full training data (:func:`~bnn.inference.map_search.map_estimate.map_weights`,
        a learned
        noise chosen with it) and passes them here as the mapping.
    init_rho : float
        Initial :math:`\rho` of every latent, :math:`\sigma = \operatorname{softplus}(\rho)`
        (-3 gives :math:`\sigma \approx 0.049`).
    kl : KLEstimator or str
        The KL of the weight sites: ``"auto"`` (closed form on Gaussian-prior sites, Monte Carlo elsewhere),
        ``"closed-form"`` (every weight prior must be Gaussian) or ``"monte-carlo"``. The standardised weights of a
        hierarchical prior have the Gaussian prior :math:`\mathcal{N}(0, 1)`; its latent scales, like a likelihood
        latent, always take the Monte Carlo KL (a half-Cauchy has no closed-form KL against a log-normal; module
        notes of :mod:`bnn.guides.flat_normal`).
    local_reparameterisation : bool or "auto"
        Sample pre-activations instead of weights in the ELBO (needs the closed-form KL).
        SVI applies it through :meth:`elbo_pair`. ``"auto"`` (the default) applies it wherever it
        can: every weight site the weight or bias of a layer written with :func:`bnn.models.layers.linear` or
        :func:`~bnn.models.layers.conv` (the MLPs and the CNN), with the closed-form KL on every weight site (a
        Gaussian prior on every weight and ``kl="auto"`` or ``"closed-form"``) and no hierarchical prior (a weight is
        then a scale times a standardised weight, not Gaussian). With weight draws
        (plain Bayes by Backprop) and one particle the gradient's noise keeps SVI far below the ELBO it reaches
        with local reparameterisation (chosen on toy1d: ``benchmarks/results/svi_defaults.md``).

    Raises
    ------
    ValueError
        For a closed-form KL or local reparameterisation with a non-Gaussian prior, local reparameterisation under a
        hierarchical prior, an
        unknown ``init_loc`` (``"map"`` included: the guide has no data to fit it on), or init
        values naming unknown sites or of the wrong shape.
    """

    def __init__(
        self,
        model,
        *,
        init_loc: str | Mapping[str, torch.Tensor] = "prior",
        init_rho: float = -3.0,
        kl: KLEstimator | str = "auto",
        local_reparameterisation: bool | str = "auto",
    ) -> None:
        super().__init__(model)
        self.estimators = site_estimators(kl, tuple(self.weight_sites.values()), self.weight_priors)
        monte_carlo = sorted(name for name, e in self.estimators.items() if e is KLEstimator.MONTE_CARLO)
        possible = local_reparameterisation is not False and not monte_carlo and not model.hierarchical_sites
        outside = sites_outside_layers(model, torch.zeros(1, model.in_features)) if possible else []  # a probe forward
        if isinstance(local_reparameterisation, str) and local_reparameterisation == "auto":
            local_reparameterisation = possible and not outside
        if not isinstance(local_reparameterisation, bool):
            raise ValueError(f"local_reparameterisation must be True, False or 'auto', got {local_reparameterisation!r}")
        if local_reparameterisation and model.hierarchical_sites:
            raise ValueError("local reparameterisation draws each pre-activation from the Gaussian q of the weights; under "
                             f"the hierarchical prior(s) of sites {sorted(model.hierarchical_sites)} a weight is its latent "
                             "scale times a standardised weight, not Gaussian under q: use local_reparameterisation=False")
        if local_reparameterisation and monte_carlo:
            priors = sorted({type(self.weight_priors[name]).__name__ for name in monte_carlo})
            raise ValueError(
                f"local reparameterisation needs the closed-form KL, so a Gaussian prior on every weight site; "
                f"sites {monte_carlo} use the Monte Carlo KL (priors {priors}, or kl='monte-carlo'): "
                "use a Gaussian prior with kl='auto', or local_reparameterisation=False"
            )
        if local_reparameterisation and outside:
            raise ValueError(f"local reparameterisation draws the outputs of layers written with "
                             f"bnn.models.layers.linear/conv; {type(model).__name__}'s {outside[0]!r} is not the "
                             "weight or bias of such a layer: use local_reparameterisation=False")
        self.local_reparameterisation = local_reparameterisation
        init_rho = check_finite("init_rho", init_rho)
        self.analytic_sites = tuple(name for name, e in self.estimators.items() if e is KLEstimator.CLOSED_FORM)
        closed_form, prior_loc, prior_scale = [], [], []
        for name, site in self.weight_sites.items():
            closed = name in self.analytic_sites
            prior = self.weight_priors[name]
            loc, scale = prior.site_loc_scale(site) if closed else (torch.zeros(site.shape), torch.ones(site.shape))
            closed_form += [closed] * site.numel
            prior_loc.append(torch.as_tensor(loc, dtype=torch.get_default_dtype()).reshape(-1))
            prior_scale.append(torch.as_tensor(scale, dtype=torch.get_default_dtype()).reshape(-1))
        self._closed_form = torch.tensor(closed_form)
        self._prior_loc = torch.cat(prior_loc)
        self._prior_scale = torch.cat(prior_scale)
        # one parameter tensor, rows (mu, rho): one Adam update per step instead of two
        loc = self.flatten(self._initial_values(init_loc))
        self.loc_rho = PyroParam(torch.stack([loc, torch.full_like(loc, init_rho)]))

    def _initial_values(self, init_loc) -> dict[str, torch.Tensor]:
        if isinstance(init_loc, Mapping):
            unknown = sorted(set(init_loc) - set(self.blocks))
            if unknown:
                raise ValueError(f"init_loc names unknown sites {unknown}; the model's latent sites are {list(self.blocks)}")
            for name, value in init_loc.items():
                if tuple(torch.as_tensor(value).shape) != tuple(self.blocks[name].shape):
                    raise ValueError(
                        f"init_loc[{name!r}] has shape {tuple(torch.as_tensor(value).shape)}, "
                        f"the site has shape {tuple(self.blocks[name].shape)}"
                    )
            return {**self.prior_start(), **init_loc}
        if init_loc == "prior":
            return self.prior_start()
        if init_loc == "small":
            draws = self.prior_start()
            draws.update({name: SMALL_INIT_SD * torch.randn(site.shape) for name, site in self.weight_sites.items()})
            return draws
        if init_loc == "map":
            raise ValueError("init_loc='map' needs the training data, which a guide does not have when it is built: "
                             "fit with guide_options={'init_loc': 'map'} (or --guide-option init_loc=map), or pass "
                             "init_loc=map_weights(model, x, y) (bnn.inference.map_search.map_estimate)")
        raise ValueError(f"init_loc must be one of {[*INIT_LOCS, 'map']} or a mapping of site values, got {init_loc!r} "
                         "('map' through fit or --guide-option init_loc=map, which fit the MAP on the full training data)")

    def flat_parameters(self) -> dict[str, torch.Tensor]:
        r"""The flat guide parameters from the rows :math:`(\mu, \rho)` of ``loc_rho``.

        .. math::

            \sigma = \operatorname{softplus}(\rho) = \ln(1 + e^{\rho}) > 0 .

        Returns
        -------
        dict of str to torch.Tensor
            ``"loc"`` (:math:`\mu`) and ``"scale"`` (:math:`\sigma`), each of shape ``(D,)``: the weights
            first, then the likelihood's latents (unconstrained space).
        """
        loc, rho = self.loc_rho
        return {"loc": loc, "scale": F.softplus(rho)}

    def weight_log_density(self, z, params):
        r""":math:`\sum_k \log q(w_k)` over Monte Carlo weights plus :math:`\sum_k \mathrm{KL}_k` over closed-form ones."""
        w = self.num_weights
        z, loc, scale = z[..., :w], params["loc"][:w], params["scale"][:w]
        if not self.analytic_sites:
            return normal_log_prob(z, loc, scale).sum(-1)
        kl = gaussian_kl(loc, scale, self._prior_scale, self._prior_loc)
        if len(self.analytic_sites) == len(self.weight_sites):
            return kl.sum()
        return torch.where(self._closed_form, kl, normal_log_prob(z, loc, scale)).sum(-1)

    # ------------------------------------------------------ local reparameterisation
    def elbo_pair(self):
        """The model and guide SVI optimises (see :meth:`FlatNormalGuide.elbo_pair`); with local
        reparameterisation the model runs inside :func:`bnn.models.layers.local_reparameterisation`, so that every
        layer draws its output (pre-activations) from :math:`q` rather than computing it from the weight draw."""
        elbo_model, elbo_guide = super().elbo_pair()
        if not self.local_reparameterisation:
            return elbo_model, elbo_guide

        def locally_reparameterised(x, y=None, num_data=None):
            with local_reparameterisation(self.layer_gaussians()):
                return elbo_model(x, y, num_data)

        return locally_reparameterised, elbo_guide

    @pyro_method
    def layer_gaussians(self) -> dict[str, LayerGaussian]:
        """:math:`q`'s locations and standard deviations of each layer's weight and bias, by layer name."""
        params = self.flat_parameters()

        def loc_scale(site: str) -> tuple[torch.Tensor, torch.Tensor]:
            return self.blocks[site].take(params["loc"]), self.blocks[site].take(params["scale"])

        groups = {site.group for site in self.model.sites}
        return {group: LayerGaussian(*loc_scale(f"{group}.weight"), *loc_scale(f"{group}.bias")) for group in groups}
