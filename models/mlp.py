r"""The Bayesian multilayer perceptron, a plain Pyro program.

For layers :math:`l = 0, \dots, L-1` with weights :math:`W_l \in \mathbb{R}^{d_{l+1} \times d_l}`
and biases :math:`b_l \in \mathbb{R}^{d_{l+1}}`,

.. math::

    h_0 = x, \qquad h_{l+1} = \phi(h_l W_l^\top + b_l), \qquad f(x; W) = h_{L-1} W_{L-1}^\top + b_{L-1},

    W_l \sim p_l(W_l), \quad b_l \sim p_l(b_l), \qquad
    y_i \mid x_i, W \sim p(y_i \mid f(x_i; W)) \quad (i = 1, \dots, N).

Sample sites, in this order (the names are stable and part of the API):

============================  =====================================================
``layers.{l}.weight``         shape ``(d_{l+1}, d_l)``, the ``nn.Linear`` layout
``layers.{l}.bias``           shape ``(d_{l+1},)``
``sigma``                     only for a Gaussian likelihood with learned noise
``obs``                       the observations, under the plate ``data`` (dim -1)
============================  =====================================================

The network is written with batched ``matmul``: every weight may carry leading sample
dimensions, so ``Trace_ELBO(vectorize_particles=True)``, ``Predictive(parallel=True)``
and vectorised log-likelihoods work (``PyroModule[nn.Linear]`` breaks all three).
Pyro's plates give a latent drawn under a vectorising plate the shape
``(*sample, 1, *site_shape)``, the ``1`` sitting in the slot of the ``data`` plate; inside
the Pyro program such a trailing singleton is dropped (:meth:`BayesianMLP.squeeze_plate_slot`),
so ``f`` has shape ``(*sample, n, out_features)``. :meth:`BayesianMLP.forward` itself takes
values as ``(*sample, *site_shape)`` and never guesses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyro
import torch
from bnn.models.activations import ACTIVATIONS
from bnn.models.likelihoods import Likelihood, get_likelihood
from bnn.models.priors import Prior, get_prior
from bnn.models.sites import WeightSite

from bnn.registry import Registry

ARCHITECTURES: Registry[type] = Registry("architecture")
"""Network classes by the ``"architecture"`` entry of their config (``mlp`` when it has none)."""
DATA_PLATE = "data"
OBSERVED_SITE = "obs"
MAX_PLATE_NESTING = 1  # the data plate; inference methods put their own sample plates left of it


def _sample_dims_first(value: torch.Tensor, event_shape: torch.Size) -> torch.Tensor:
    """``value`` as ``(*sample, *event_shape)``, dropping the data plate's singleton slot."""
    lead = value.shape[: value.dim() - len(event_shape)]
    if len(lead) > 0 and lead[-1] == 1:
        lead = lead[:-1]
    return value.reshape(lead + event_shape)


def layer_sites(widths: Sequence[int], group: str = "layers", first_layer: int = 0) -> tuple[WeightSite, ...]:
    """The sites ``{group}.{l}.weight`` ``(d_{l+1}, d_l)`` and ``{group}.{l}.bias`` of dense layers of ``widths``."""
    return tuple(
        WeightSite(f"{group}.{first_layer + index}.{kind}", first_layer + index, torch.Size(shape), fan_in)
        for index, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:]))
        for kind, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,)))
    )


class BayesianMLP:
    r"""A fully connected Bayesian network with a prior on every weight and bias.

    Parameters
    ----------
    in_features : int
        Number of inputs :math:`d_0`.
    out_features : int
        Number of outputs: 1 for regression or binary, K for K-class classification.
    hidden : sequence of int
        Widths of the hidden layers; ``()`` gives a Bayesian generalised linear model.
    activation : str
        Hidden activation, a name in :data:`bnn.models.activations.ACTIVATIONS`.
    prior : Prior, str or mapping
        One prior for every site, or a mapping whose keys are site names
        (``"layers.1.weight"``), layer names (``"layers.1"``) or ``"*"`` (every other
        site); the most specific key wins. Each prior is asked for its sites' distributions
        here, so one that cannot serve a site (a posterior prior of another model) fails now.
        Change it later with ``model.prior = ...``.
    likelihood : Likelihood or str
        The observation model, see :mod:`bnn.models.likelihoods`.

    Examples
    --------
    >>> model = BayesianMLP(1, 1, hidden=(50,), prior=GaussianPrior(1.0))   # doctest: +SKIP
    >>> model.prior = "laplace"                                               # doctest: +SKIP
    >>> pyro.poutine.trace(model).get_trace(x, y).nodes["layers.0.weight"]  # doctest: +SKIP
    """

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        hidden: Sequence[int] = (50,),
        activation: str = "tanh",
        prior: Prior | str | Mapping[str, Any] = "gaussian",
        likelihood: Likelihood | str | Mapping[str, Any] = "gaussian",
    ) -> None:
        hidden = tuple(hidden)
        for what, value in [("in_features", in_features), ("out_features", out_features)] + [
            ("hidden width", h) for h in hidden
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive integer, got {value!r}")
        widths = (in_features, *hidden, out_features)
        largest = max(a * b for a, b in zip(widths, widths[1:]))
        if largest >= 2**63:  # torch indexes tensors with int64: such a weight matrix cannot exist
            raise ValueError(f"a weight matrix of these widths would hold {largest} weights, more than a tensor can index "
                             "(2^63 - 1); use smaller hidden widths")
        self.in_features = in_features
        self.out_features = out_features
        self.hidden = hidden
        self.activation = activation
        self._activation_fn = ACTIVATIONS.get(activation)
        self.likelihood = get_likelihood(likelihood)
        self.likelihood.check_out_features(out_features)
        self.sites: tuple[WeightSite, ...] = self._weight_sites()
        self.prior = prior

    def _weight_sites(self) -> tuple[WeightSite, ...]:
        """The weight sites, weight then bias of each layer from the inputs to the outputs."""
        return layer_sites((self.in_features, *self.hidden, self.out_features))

    # ----------------------------------------------------------------- priors
    @property
    def prior(self) -> dict[str, Prior]:
        """The prior of each weight site, by site name (assign to swap priors)."""
        return dict(self._site_priors)

    @prior.setter
    def prior(self, spec: Prior | str | Mapping[str, Any]) -> None:
        is_per_site = isinstance(spec, Mapping) and "name" not in spec
        table = {key: get_prior(value) for key, value in spec.items()} if is_per_site else {"*": get_prior(spec)}
        layer_names = {site.group for site in self.sites}
        site_names = {site.name for site in self.sites}
        unknown = set(table) - layer_names - site_names - {"*"}
        if unknown:
            raise ValueError(
                f"prior keys {sorted(unknown)} match no site; use '*', a layer "
                f"{sorted(layer_names)} or a site {sorted(site_names)}"
            )
        resolved = {}
        for site in self.sites:
            for key in (site.name, site.group, "*"):
                if key in table:
                    resolved[site.name] = table[key]
                    break
            else:
                raise ValueError(f"no prior given for site {site.name!r}; add a '*' entry for the rest")
            resolved[site.name].distribution(site)  # a prior that cannot serve the site (wrong shape) fails here
        self._prior_table = table
        self._site_priors = resolved

    # ---------------------------------------------------------------- network
    @property
    def latent_shapes(self) -> dict[str, torch.Size]:
        """Every latent site and its shape, weights first, then likelihood latents."""
        shapes = {site.name: site.shape for site in self.sites}
        shapes.update({name: d.event_shape for name, d in self.likelihood.latent_priors().items()})
        return shapes

    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Network output :math:`f(x; W)` of shape ``(*sample, n, out_features)``.

        ``weights`` maps each site name to a tensor of shape ``(*sample, *site.shape)``.
        """
        if x.dim() != 2 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have shape (n, {self.in_features}), got {tuple(x.shape)}")
        h = x
        last = self.sites[-1].layer
        for weight_site, bias_site in zip(self.sites[::2], self.sites[1::2]):
            weight, bias = weights[weight_site.name], weights[bias_site.name]
            if weight.shape[weight.dim() - 2 :] != weight_site.shape or bias.shape[bias.dim() - 1 :] != bias_site.shape:
                raise ValueError(
                    f"layer {weight_site.layer} needs weight (..., {tuple(weight_site.shape)}) and bias "
                    f"(..., {tuple(bias_site.shape)}), got {tuple(weight.shape)} and {tuple(bias.shape)}"
                )
            h = torch.matmul(h, weight.transpose(-1, -2)) + bias.unsqueeze(-2)
            if weight_site.layer != last:
                h = self._activation_fn(h)
        return h

    def likelihood_latents(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The likelihood's latent values from ``values`` (each ``(*sample, *event_shape)``)."""
        return {name: values[name] for name in self.likelihood.latent_priors()}

    def squeeze_plate_slot(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Latent values as drawn under Pyro plates, ``(*sample, 1, *shape)``, as ``(*sample, *shape)``."""
        return {name: _sample_dims_first(values[name], shape) for name, shape in self.latent_shapes.items()}

    def observation_distribution(self, x: torch.Tensor, values: Mapping[str, torch.Tensor]):
        """:math:`p(y \\mid x, W)` with batch shape ``(*sample, n)`` for latent ``values``."""
        return self.likelihood.distribution(self.forward(x, values), self.likelihood_latents(values))

    def __call__(self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None):
        """Run the generative program; ``num_data`` rescales a minibatch ``x`` to the full data."""
        values = {
            site.name: pyro.sample(site.name, self._site_priors[site.name].distribution(site).to_event(len(site.shape)))
            for site in self.sites
        }
        values.update({name: pyro.sample(name, prior) for name, prior in self.likelihood.latent_priors().items()})
        distribution = self.observation_distribution(x, self.squeeze_plate_slot(values))
        n = x.shape[0]
        subsample = None if num_data is None else torch.arange(n)
        with pyro.plate(DATA_PLATE, size=n if num_data is None else num_data, subsample=subsample):
            return pyro.sample(OBSERVED_SITE, distribution, obs=y)

    # --------------------------------------------------------------- configs
    def config(self) -> dict[str, Any]:
        """JSON-able architecture, priors and likelihood; :meth:`from_config` rebuilds the model."""
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "prior": {key: prior.config() for key, prior in self._prior_table.items()},
            "likelihood": self.likelihood.config(),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BayesianMLP:
        """Inverse of :meth:`config`; a config with an ``"architecture"`` entry that ``cls`` is not (a subclass of)
        builds that registered class."""
        architecture = ARCHITECTURES.get(config.get("architecture", "mlp"))
        if not issubclass(cls, architecture):
            return architecture.from_config(config)
        return cls(
            config["in_features"],
            config["out_features"],
            hidden=config["hidden"],
            activation=config["activation"],
            prior=config["prior"],
            likelihood=config["likelihood"],
        )

    def __repr__(self) -> str:
        widths = "-".join(map(str, (self.in_features, *self.hidden, self.out_features)))
        priors = ", ".join(f"{k}: {type(p).__name__}" for k, p in self._prior_table.items())
        return f"BayesianMLP({widths}, {self.activation}, prior={{{priors}}}, likelihood={type(self.likelihood).__name__})"


ARCHITECTURES.register("mlp", BayesianMLP)
