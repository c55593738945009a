r"""The model interface: what every inference method may use of a Bayesian network.

A Bayesian network of the collection is the Pyro program

.. math::

    W_s \sim p_s(W_s) \quad (s \in \text{sites}), \qquad z \sim p(z), \qquad
    y_i \mid x_i, W, z \sim p\big(y_i \mid f(x_i; W), z\big) \quad (i = 1, \dots, N),

where each weight site :math:`s` (a :class:`~bnn.models.sites.WeightSite`: name, shape, layer, fan-in) has a prior
from :mod:`bnn.models.priors`, :math:`z` are the likelihood's own latents (a learned noise scale) and :math:`f` is a
deterministic network written as a *batched* function of the weights. A network states its sites and its
:meth:`~BayesianNetwork.forward`; this base class supplies the rest: the priors per site (one prior, or a mapping by
site, layer or ``"*"``), the Pyro program (``__call__``), the likelihood's latents, and saving by a registered name.
Every method of :func:`bnn.inference.fit` works through this interface alone: SVI and NUTS through the Pyro program
and the sites, Laplace, the MAP and the ensemble through :meth:`~BayesianNetwork.forward` over the flat weights.
A method that needs more declares it and refuses other networks before any work (MC dropout needs to know where the
network's dropout goes, :meth:`~BayesianNetwork.dropped_inputs`); the local reparameterisation of the mean-field guide
needs layers written with :mod:`bnn.models.layers`.

Writing a network takes its sites, ``forward`` and ``arguments``::

    @ARCHITECTURES.register("skip")
    class SkipNet(BayesianNetwork):
        def __init__(self, in_features, hidden=8, *, prior="gaussian", likelihood="gaussian"):
            self.hidden = hidden
            sites = (WeightSite("hidden.weight", 0, torch.Size((hidden, in_features)), in_features), ...)
            super().__init__(in_features, 1, sites, prior=prior, likelihood=likelihood)

        def forward(self, x, weights):      # weights[name]: (*sample, *site.shape) -> (*sample, n, 1)
            ...

        def arguments(self):
            return {"in_features": self.in_features, "hidden": self.hidden}

Contract of :meth:`~BayesianNetwork.forward`: ``x`` has shape ``(n, in_features)``, each ``weights[name]`` has shape
``(*sample, *site.shape)`` with the same leading sample dimensions (none, one or more), and the result has shape
``(*sample, n, out_features)``: write it with batched ``matmul`` (``x @ w.transpose(-1, -2)``), not ``nn.Linear``,
so that vectorised ELBOs, ``Predictive(parallel=True)`` and the per-row Jacobians of Laplace (``torch.func``) work.
The output layer's sites come last in :attr:`~BayesianNetwork.sites` (:meth:`~BayesianNetwork.output_sites`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyro
import pyro.distributions as dist
import torch
from bnn.models.activations import KINKED_ACTIVATIONS
from bnn.models.architecture_flags import CommandLine
from bnn.models.dropout import DroppedInputs
from bnn.models.hierarchical_priors import HierarchicalPrior
from bnn.models.likelihoods import Likelihood, get_likelihood
from bnn.models.priors import Prior, get_prior
from bnn.models.sites import WeightSite

from bnn.registry import Registry

ARCHITECTURES: Registry[type] = Registry("architecture")
"""Network classes by the ``"architecture"`` entry of their config (``mlp`` when a config has none)."""
DATA_PLATE = "data"
OBSERVED_SITE = "obs"
DECENTRED = "_decentered"
"""The suffix of the standardised site :math:`z_k = w_k / s_k` of a weight under a hierarchical prior (Pyro's
``LocScaleReparam`` name)."""
MAX_PLATE_NESTING = 1  # the data plate; inference methods put their own sample plates left of it


def _sample_dims_first(value: torch.Tensor, event_shape: torch.Size) -> torch.Tensor:
    """``value`` as ``(*sample, *event_shape)``, dropping the data plate's singleton slot."""
    lead = value.shape[: value.dim() - len(event_shape)]
    if len(lead) > 0 and lead[-1] == 1:
        lead = lead[:-1]
    return value.reshape(lead + event_shape)


@dataclass(frozen=True)
class DenseLayers:
    r"""A network that is a chain of dense layers, :math:`h_{l+1} = \phi(h_l W_l^\top + b_l)` with no activation
    after the last, stated for the methods that write it out layer by layer.

    Attributes
    ----------
    layers : tuple of (WeightSite, WeightSite)
        The weight ``(d_{l+1}, d_l)`` and bias ``(d_{l+1},)`` sites of each layer, from the inputs to the outputs.
    activation : str
        The hidden activation, a name in :data:`bnn.models.activations.ACTIVATIONS`.
    """

    layers: tuple[tuple[WeightSite, WeightSite], ...]
    activation: str


MAX_DRAWN_WEIGHTS = 2**20
"""The largest site whose prior :func:`check_site_prior` draws from (8 MiB of float64)."""


def check_site_prior(site: WeightSite, prior: Prior) -> None:
    """Refuse (``ValueError``) a ``prior`` that cannot serve ``site``: a distribution of another shape, or one whose
    draw or log-density at it is not finite (a negative scale built with ``validate_args=False``), found here rather
    than by torch in the middle of a fit (an improper prior, which has no draws, is not drawn from). The draw comes from a
    fork of torch's generator, which it leaves as it was; a site of more than :data:`MAX_DRAWN_WEIGHTS` weights is checked
    for its shape alone, so that a network too big for memory is still refused by the fit's memory check, not here."""
    if isinstance(prior, HierarchicalPrior):
        return  # its scale sites and conditional are checked by BayesianNetwork's prior setter (_scale_groups_of)
    distribution = prior.distribution(site)
    shape = tuple(distribution.batch_shape + distribution.event_shape)
    if shape != tuple(site.shape):
        raise ValueError(f"the prior {type(prior).__name__} of site {site.name!r} gives a distribution of shape {shape}; "
                         f"the site's is {tuple(site.shape)}: expand it to site.shape")
    if site.numel > MAX_DRAWN_WEIGHTS:
        return
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        try:
            draw = distribution.sample()
            log_density = distribution.log_prob(draw)
        except NotImplementedError:  # an improper prior (ImproperUniform) has no draws; its density is the user's
            return
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"the prior {type(prior).__name__} of site {site.name!r} cannot be drawn from ({error}): "
                             "check its parameters (a scale must be positive)") from None
    if not (torch.isfinite(draw).all() and torch.isfinite(log_density).all()):
        raise ValueError(f"the prior {type(prior).__name__} of site {site.name!r} draws values whose log-density is not "
                         "finite (NaN or infinite): check its parameters (a scale must be positive)")


class BayesianNetwork(abc.ABC):
    r"""Base class of the collection's networks: weight sites with priors, a batched forward, a likelihood, and
    the Pyro program they make (module notes).

    Parameters
    ----------
    in_features : int
        The columns of ``x`` the network reads.
    out_features : int
        The outputs of :meth:`forward`, ``(*sample, n, out_features)``.
    sites : sequence of WeightSite
        The weight sites, in the order of the flat weight vector; the output layer's sites last.
    prior : Prior, str or mapping
        One prior for every site, or a mapping whose keys are site names (``"layers.1.weight"``), layer names
        (``"layers.1"``) or ``"*"`` (every other site); the most specific key wins. Each prior is asked for its
        sites' distributions here, so one that cannot serve a site fails now. Change it later with
        ``model.prior = ...``.
    likelihood : Likelihood, str or mapping
        The observation model, see :mod:`bnn.models.likelihoods`.

    Raises
    ------
    ValueError
        For sizes that are not positive integers, duplicate site names, a likelihood that does not suit
        ``out_features``, or a prior that matches no site or cannot serve one.
    """

    command_line: ClassVar[CommandLine | None] = None
    """The architecture as a choice of ``--model``, with its flags (:mod:`bnn.models.architecture_flags`); ``None``: not
    built from the command line (a network that needs more than a data set's shape, such as a torch module)."""

    def __init__(self, in_features: int, out_features: int, sites: Sequence[WeightSite], *,
                 prior: Prior | str | Mapping[str, Any] = "gaussian",
                 likelihood: Likelihood | str | Mapping[str, Any] = "gaussian") -> None:
        for what, value in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{what} must be a positive integer, got {value!r}")
        sites = tuple(sites)
        if not sites or not all(isinstance(site, WeightSite) for site in sites):
            raise ValueError(f"a network needs one WeightSite or more (bnn.models.WeightSite), got {sites!r}")
        names = [site.name for site in sites]
        if len(set(names)) != len(names):
            raise ValueError(f"site names must be unique, got {names}")
        self.in_features = in_features
        self.out_features = out_features
        self.likelihood = get_likelihood(likelihood)
        self.likelihood.check_out_features(out_features)
        self.sites: tuple[WeightSite, ...] = sites
        self.prior = prior

    # ----------------------------------------------------------- the network
    @abc.abstractmethod
    def forward(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Network output :math:`f(x; W)` of shape ``(*sample, n, out_features)`` for ``x`` of shape
        ``(n, in_features)`` and each ``weights[name]`` of shape ``(*sample, *site.shape)``."""

    @abc.abstractmethod
    def arguments(self) -> dict[str, Any]:
        """JSON-able keyword arguments that rebuild this network with its class, besides ``prior`` and
        ``likelihood``: ``type(self)(**self.arguments(), prior=..., likelihood=...)``."""

    def activation_widths(self) -> tuple[int, ...]:
        """The values one input row makes at each stage of the network, its inputs first: the memory check, the
        Laplace curvature's chunks and the predictive's batches are sized by them. By default the inputs and the
        leading dimension of every site of two or more dimensions (a dense layer's output units)."""
        return (self.in_features, *(site.shape[0] for site in self.sites if len(site.shape) >= 2))

    def output_sites(self) -> tuple[WeightSite, ...]:
        """The sites of the layer that makes the outputs: the trailing sites that share the last site's layer
        (Laplace's ``structure="last-layer"`` covers them)."""
        last = self.sites[-1].layer
        count = next((i for i, site in enumerate(reversed(self.sites)) if site.layer != last), len(self.sites))
        return self.sites[len(self.sites) - count:]

    def dense_layers(self) -> DenseLayers | None:
        """The network as a chain of dense layers, for the methods that write it out by hand; ``None`` (the
        default) for a network that is not one."""
        return None

    def has_kinks(self) -> bool:
        """Whether the log joint has kinks in the weights (a ReLU unit or a max-pooling window switching at a training
        input), where a MAP polish stops whatever its budget: such a network's polish gets the smaller budget and its
        cost the polish counts of such networks (:data:`~bnn.inference.map_search.map_cost.KINKED_POLISH`). By default a chain
        of dense layers (:meth:`dense_layers`) whose activation is in
        :data:`~bnn.models.activations.KINKED_ACTIVATIONS`; any other network is taken as smooth."""
        chain = self.dense_layers()
        return chain is not None and chain.activation in KINKED_ACTIVATIONS

    def dropped_inputs(self) -> tuple[DroppedInputs, ...] | None:
        """Where MC dropout drops units (:mod:`bnn.models.dropout`): the layers whose inputs it masks, each called with
        :func:`~bnn.models.layers.linear` or :func:`~bnn.models.layers.conv` under its weight's group, and by which
        units; ``None`` for a network that does not say, which MC dropout refuses. By default a chain of dense layers
        (:meth:`dense_layers`) drops the inputs of every layer, unit by unit, and any other network says nothing."""
        chain = self.dense_layers()
        if chain is None:
            return None
        return tuple(DroppedInputs(weight, weight.shape[1]) for weight, _ in chain.layers)

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
            check_site_prior(site, resolved[site.name])
        self._scale_groups = _scale_groups_of(self.sites, resolved)
        self._prior_table = table
        self._site_priors = resolved

    @property
    def hierarchical_sites(self) -> dict[str, HierarchicalPrior]:
        """The weight sites whose prior is hierarchical (their scales are latent), by name, with their priors."""
        return {name: prior for name, prior in self._site_priors.items() if isinstance(prior, HierarchicalPrior)}

    @property
    def scale_shapes(self) -> dict[str, torch.Size]:
        """The latent scale sites of the hierarchical priors (``layers.0.scale``, ``layers.0.relevance``, ...) and
        their shapes, in the order the program draws them; empty for fixed priors."""
        return {name: distribution.event_shape for name, distribution in self.scale_distributions().items()}

    def scale_distributions(self) -> dict[str, Any]:
        """The hyperprior of every scale site (:attr:`scale_shapes`), built now in the current default dtype."""
        return {name: distribution for group, (prior, members) in self._scale_groups.items()
                for name, distribution in prior.scale_sites(group, members).items()}

    def non_weight_priors(self) -> dict[str, Any]:
        """The prior of every latent that is not a weight: the scales of the hierarchical priors
        (:meth:`scale_distributions`), then the likelihood's latents (a learned noise)."""
        return {**self.scale_distributions(), **self.likelihood.latent_priors()}

    def prior_config(self) -> dict[str, Any]:
        """The prior as it was given, JSON-able: each key (``"*"``, a layer, a site) and its prior's config."""
        return {key: prior.config() for key, prior in self._prior_table.items()}

    # ----------------------------------------------------------- the program
    @property
    def latent_shapes(self) -> dict[str, torch.Size]:
        """Every latent site the posterior reports and its shape: the scales of hierarchical priors, the weights,
        then the likelihood's latents."""
        shapes = self.scale_shapes
        shapes.update({site.name: site.shape for site in self.sites})
        shapes.update({name: d.event_shape for name, d in self.likelihood.latent_priors().items()})
        return shapes

    @property
    def program_latent_shapes(self) -> dict[str, torch.Size]:
        """The latent sites the Pyro program samples and their shapes: :attr:`latent_shapes`, with each weight site of
        a hierarchical prior replaced by its standardised site ``<site>_decentered`` (module notes of
        :mod:`bnn.models.hierarchical_priors`)."""
        hierarchical = self.hierarchical_sites
        return {name + DECENTRED if name in hierarchical else name: shape for name, shape in self.latent_shapes.items()}

    def reported_values(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The values of :attr:`latent_shapes` from those of :attr:`program_latent_shapes`, each
        ``(*lead, *shape)`` with the same leading dimensions: :math:`w_k = s_k(\\xi)\\,z_k` for the weights of a
        hierarchical prior, the rest as they are."""
        hierarchical = self.hierarchical_sites
        reported = {}
        for name in self.latent_shapes:
            if name in hierarchical:
                site = self._site(name)
                reported[name] = hierarchical[name].site_scale(site, values) * values[name + DECENTRED]
            else:
                reported[name] = values[name]
        return reported

    def _site(self, name: str) -> WeightSite:
        return next(site for site in self.sites if site.name == name)

    def likelihood_latents(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The likelihood's latent values from ``values`` (each ``(*sample, *event_shape)``)."""
        return {name: values[name] for name in self.likelihood.latent_priors()}

    def squeeze_plate_slot(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Latent values as drawn under Pyro plates, ``(*sample, 1, *shape)``, as ``(*sample, *shape)``."""
        return {name: _sample_dims_first(values[name], shape) for name, shape in self.latent_shapes.items()}

    def observation_distribution(self, x: torch.Tensor, values: Mapping[str, torch.Tensor]):
        r""":math:`p(y \mid x, W)` with batch shape ``(*sample, n)`` for latent ``values``."""
        return self.likelihood.distribution(self.forward(x, values), self.likelihood_latents(values))

    def sample_latents(self, *, centred: bool = False) -> dict[str, torch.Tensor]:
        r"""Draw every latent site in the program: the scales of hierarchical priors, the weights, the likelihood's
        latents; return their values by the names of :attr:`latent_shapes`.

        A weight site of a hierarchical prior is drawn non-centred, :math:`z_k \sim \mathcal{N}(0, 1)` at
        ``<site>_decentered`` and the weight :math:`w_k = s_k(\xi) z_k` a deterministic site of its own name (the
        coordinates of Pyro's ``LocScaleReparam(0)``), or with ``centred`` from its conditional prior
        :math:`\mathcal{N}(0, s_k(\xi)^2)` at its own name: the same joint density of :math:`(\xi, w)`.
        """
        values = {name: pyro.sample(name, distribution) for name, distribution in self.scale_distributions().items()}
        for site in self.sites:
            prior, event_dims = self._site_priors[site.name], len(site.shape)
            if not isinstance(prior, HierarchicalPrior):
                values[site.name] = pyro.sample(site.name, prior.distribution(site).to_event(event_dims))
            elif centred:
                values[site.name] = pyro.sample(site.name, prior.conditional(site, values).to_event(event_dims))
            else:
                standard = pyro.sample(site.name + DECENTRED, dist.Normal(0.0, 1.0).expand(site.shape).to_event(event_dims))
                weight = prior.site_scale(site, values) * standard
                values[site.name] = pyro.deterministic(site.name, weight, event_dim=event_dims)
        values.update({name: pyro.sample(name, prior) for name, prior in self.likelihood.latent_priors().items()})
        return values

    def __call__(self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None, *,
                 centred: bool = False):
        """Run the generative program; ``num_data`` rescales a minibatch ``x`` to the full data; ``centred`` draws the
        weights of hierarchical priors centred (:meth:`sample_latents`; the inference methods use the default)."""
        values = self.sample_latents(centred=centred)
        distribution = self.observation_distribution(x, self.squeeze_plate_slot(values))
        n = x.shape[0]
        subsample = None if num_data is None else torch.arange(n)
        with pyro.plate(DATA_PLATE, size=n if num_data is None else num_data, subsample=subsample):
            return pyro.sample(OBSERVED_SITE, distribution, obs=y)

    # --------------------------------------------------------------- configs
    def config(self) -> dict[str, Any]:
        """JSON-able architecture (its registered name and :meth:`arguments`), priors and likelihood;
        :meth:`from_config` rebuilds the model."""
        name = ARCHITECTURES.name_of(type(self))
        if name is None:
            raise ValueError(f"{type(self).__name__} is not registered as an architecture, so it cannot be saved by "
                             f"name; register it with @ARCHITECTURES.register('a-name') (bnn.models.ARCHITECTURES)")
        return {"architecture": name, **self.arguments(), "prior": self.prior_config(), "likelihood": self.likelihood.config()}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BayesianNetwork:
        """Inverse of :meth:`config`. The config's ``"architecture"`` (``mlp`` when it has none) names the class; a
        ``cls`` that is that class or a subclass of it builds itself, any other call builds the named class."""
        name = config.get("architecture", "mlp")
        architecture = ARCHITECTURES.get(name)
        if not (isinstance(cls, type) and issubclass(cls, architecture)):
            return architecture.from_config(config)
        missing = sorted({"prior", "likelihood"} - set(config))
        if missing:
            raise ValueError(f"the config of a {name!r} network lacks {missing}")
        arguments = {key: value for key, value in config.items() if key not in ("architecture", "prior", "likelihood")}
        model = cls(**arguments, prior=config["prior"], likelihood=config["likelihood"])
        if set(arguments) != set(model.arguments()):
            raise ValueError(f"the config of a {name!r} network must give the arguments {sorted(model.arguments())}, "
                             f"got {sorted(arguments)}")
        return model

    @classmethod
    def for_data(cls, in_features: int, out_features: int, input_shape: tuple[int, ...] | None, *,
                 prior: Mapping[str, Any], likelihood: Mapping[str, Any], **arguments: Any) -> BayesianNetwork:
        """The network for a data set of ``in_features`` columns (read as an image or signal of ``input_shape`` where
        the data set has one) and ``out_features`` outputs, with its :attr:`command_line` flags' ``arguments``; what
        ``--model`` builds. By default the constructor with the sizes, the arguments, the prior and the likelihood."""
        return cls(in_features, out_features, **arguments, prior=prior, likelihood=likelihood)

    def state(self) -> dict[str, torch.Tensor] | None:
        """The tensors the network holds beyond its JSON :meth:`config` (a whole module's weights and buffers), saved
        as tensors only beside the config and given back to :meth:`from_state`; ``None`` (the default) for a network
        its config rebuilds alone."""
        return None

    def state_module(self) -> torch.nn.Module | None:
        """The module whose structure :meth:`state` fills, which loading needs given again (``None``, the default: a
        network its config rebuilds)."""
        return None

    @classmethod
    def from_state(cls, config: Mapping[str, Any], state: Mapping[str, torch.Tensor],
                   module: Any = None) -> BayesianNetwork:
        """Inverse of :meth:`config` with :meth:`state` (and, for a network of a torch module, the ``module`` whose
        structure the tensors fill), for a network that has a state (``ValueError`` for one that has none)."""
        raise ValueError(f"a {config.get('architecture', 'mlp')!r} network keeps no state beside its config; the saved "
                         "state file is not from this network: fit and save the posterior again")

    def __repr__(self) -> str:
        priors = ", ".join(f"{k}: {type(p).__name__}" for k, p in self._prior_table.items())
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.arguments().items())
        return f"{type(self).__name__}({arguments}, prior={{{priors}}}, likelihood={type(self.likelihood).__name__})"


def _scale_groups_of(sites: Sequence[WeightSite], priors: Mapping[str, Prior]) -> dict[str, tuple[HierarchicalPrior, list]]:
    """The layers whose sites have a hierarchical prior among ``priors`` (by site name): layer -> (its prior, its sites
    given that prior). Refuses (``ValueError``) two hierarchical priors in one layer, whose scales would share names, and a
    prior whose scales or conditional do not fit its sites."""
    by_group: dict[str, list[WeightSite]] = {}
    for site in sites:
        if isinstance(priors[site.name], HierarchicalPrior):
            by_group.setdefault(site.group, []).append(site)
    scale_sites, groups = {}, {}
    for group, members in by_group.items():
        owners = [priors[site.name] for site in members]
        if any(owner != owners[0] for owner in owners):
            raise ValueError(f"the sites {[site.name for site in members]} of layer {group!r} have different hierarchical "
                             f"priors {[type(prior).__name__ for prior in owners]}; give one hierarchical prior "
                             "to a layer (its key is the layer's name)")
        prior = priors[members[0].name]
        groups[group] = (prior, members)
        scale_sites.update(prior.scale_sites(group, members))
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            draws = {name: scale_sites[name].sample() for name in scale_sites}
            for site in members:
                shape = tuple(prior.conditional(site, draws).batch_shape)
                if shape != tuple(site.shape):
                    raise ValueError(f"the prior {type(prior).__name__} of site {site.name!r} gives a conditional of "
                                     f"shape {shape}; the site's is {tuple(site.shape)}")
    clash = set(scale_sites) & {site.name for site in sites}
    if clash:
        raise ValueError(f"the scale sites {sorted(clash)} of a hierarchical prior have the names of weight sites; "
                         "rename those weight sites")
    return groups


class ModuleMismatchError(ValueError):
    """A network made from a torch module was rebuilt without its module, or with a module of another structure."""


def network_from_config(config: Mapping[str, Any], state: Mapping[str, torch.Tensor] | None = None,
                        module: Any = None) -> BayesianNetwork:
    """The network a :meth:`BayesianNetwork.config` (and, for a network that has one, its
    :meth:`~BayesianNetwork.state`, with the module whose structure it fills) describes, of its registered
    architecture (``ValueError`` for a config that is not a mapping; :class:`ModuleMismatchError` for a ``module`` given
    to a network that has none)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"a network's config must be a JSON object, got {type(config).__name__}")
    name = config.get("architecture", "mlp")
    architecture = ARCHITECTURES.get(name)
    if state is None:
        if module is not None:
            raise ModuleMismatchError(f"module= is for a network made from a torch module (from_module); this one is a "
                                      f"{name!r} network, rebuilt from its config alone: leave module out")
        return architecture.from_config(config)
    return architecture.from_state(config, state, module)


def check_network(model: Any) -> None:
    """Refuse, with a ``TypeError`` that says how to make one, what is not a :class:`BayesianNetwork`."""
    if not isinstance(model, BayesianNetwork):
        raise TypeError(f"model must be a BayesianNetwork (bnn.models), got {type(model).__name__}: use BayesianMLP("
                        "in_features, out_features, hidden=...), or write your own network by subclassing "
                        "bnn.models.BayesianNetwork (its sites, forward and arguments)")
