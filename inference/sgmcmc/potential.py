r"""The model's log joint in the unconstrained space, estimated on minibatches, for several chains at once.

Each chain's state is one flat vector :math:`z \in \mathbb{R}^D`: every weight site, flattened in the model's
order, then every latent of the likelihood mapped to the real line by :math:`T_j` = ``biject_to(support)^{-1}``
(:math:`z_\sigma = \log\sigma` for a learned noise). On a minibatch :math:`B` of :math:`|B|` of the :math:`N` data
points the log joint is estimated without bias by

.. math::

    \log\hat\pi(z) = \sum_s \log p_s(W_s) + \sum_j \Big[\log p_j\big(T_j^{-1}(z_j)\big)
                     + \log\big|\det J_{T_j^{-1}}(z_j)\big|\Big]
                     + \frac{N}{T|B|}\sum_{i \in B} \log p\big(y_i \mid f(x_i; W), \theta\big),

with :math:`p_s` the model's own prior of each site (``model.prior[s].distribution(site)``, any registered
prior; a Gaussian one in closed form, :class:`~bnn.models.flat_gaussian_prior.FlatGaussianPrior`), the likelihood
``model.likelihood`` and its temperature :math:`T` (1 by default,
:mod:`bnn.inference.core.temperature`); with :math:`B` all the data it is the exact log joint of
NUTS's potential. The chains are a leading dimension ``(C, D)``: priors and likelihood are evaluated for all
chains in one call and autograd gives every chain's gradient at once (the chains do not interact). Each chain
draws its own minibatches: the data are shuffled per chain and epoch, and each step takes the next
:math:`|B|` points of the chain's permutation (a new permutation when fewer than :math:`|B|` are left), so
every step's batch is a uniformly random :math:`|B|`-subset.
"""

from __future__ import annotations

import torch
from bnn.inference.core.temperature import UNTEMPERED
from bnn.inference.map_search.log_joint import prior_distributions
from bnn.models.flat_gaussian_prior import FlatGaussianPrior
from torch.distributions import biject_to


class MinibatchLogJoint:
    r""":math:`\log\hat\pi(z)` and its gradient for ``C`` chains of ``model`` on data ``(x, y)``.

    Parameters
    ----------
    model : BayesianNetwork
        The model; its priors and likelihood are read once, here.
    x, y : torch.Tensor
        The training data (validated by ``fit``).
    batch_size : int or None
        :math:`|B|`; ``None`` or at least :math:`N` means the full data at every step.
    temperature : float
        :math:`T`, the likelihood's temperature.

    Attributes
    ----------
    dim : int
        :math:`D`, the length of each chain's ``z``.
    batch_size : int
        The :math:`|B|` used (:math:`N` for full batches).
    """

    def __init__(self, model, x: torch.Tensor, y: torch.Tensor, batch_size: int | None,
                 temperature: float = UNTEMPERED) -> None:
        self.model, self.x, self.y, self.temperature = model, x, y, temperature
        self.num_data = x.shape[0]
        self.batch_size = self.num_data if batch_size is None else min(batch_size, self.num_data)
        self.shapes = dict(model.latent_shapes)
        self.sizes = [shape.numel() for shape in self.shapes.values()]
        self.dim = sum(self.sizes)
        self.weight_priors = prior_distributions(model)
        self.gaussian_prior = FlatGaussianPrior.of(model)
        start = sum(self.sizes[:list(self.shapes).index(model.sites[0].name)])  # the entries before the weights
        self.weight_span = slice(start, start + sum(site.numel for site in model.sites))
        self.latent_priors = model.likelihood.latent_priors()
        self.to_support = {name: biject_to(prior.support) for name, prior in self.latent_priors.items()}
        for name, transform in self.to_support.items():
            if transform.inverse_shape(self.shapes[name]) != self.shapes[name]:
                raise ValueError(f"likelihood latent {name!r}: transforms that change the shape are not supported")
        self._permutations: torch.Tensor | None = None
        self._position = 0

    # ---------------------------------------------------------------- layout
    def split(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """``z`` of shape ``(C, D)`` as unconstrained site values ``(C, *site_shape)``."""
        pieces = torch.split(z, self.sizes, dim=-1)
        return {name: piece.reshape(z.shape[0], *shape) for (name, shape), piece in zip(self.shapes.items(), pieces)}

    def constrained(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        r"""The site values of ``z`` ``(C, D)`` in the model's space (:math:`\sigma = e^{z_\sigma}`), ``(C, *site_shape)``."""
        values = self.split(z)
        return {name: self.to_support[name](value) if name in self.to_support else value for name, value in values.items()}

    def start(self, num_chains: int) -> torch.Tensor:
        r"""``(num_chains, D)`` starts in the unconstrained space: weights drawn from the prior (the global torch
        generator), and the likelihood's latents where the likelihood of all the data is highest given those weights
        (:meth:`start_at`).

        A prior draw of a learned noise far below the drawn network's residuals :math:`r` makes the first gradient in
        :math:`\log\sigma`, :math:`\sum_i r_i^2/\sigma^2 - N`, so large that the first step overflows at any usable
        step size; at :math:`\hat\sigma` the likelihood's part of it is zero."""
        values = {name: prior.sample((num_chains,)) for name, prior in self.weight_priors.items()}
        values |= {name: prior.sample((num_chains,)) for name, prior in self.latent_priors.items()}
        return self.start_at(values)

    def start_at(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        r"""Site values ``(C, *site_shape)`` as starts ``(C, D)``, the likelihood's latents replaced by their most likely
        values given the weights (:meth:`~bnn.models.likelihoods.Likelihood.most_likely_latents`; kept where it has no
        closed form).

        A MAP start's learned noise is the evidence's choice, larger than the MAP network's residuals, and it falls
        from there within the first steps: the step set from the curvature at such a start (of order
        :math:`N\lVert h\rVert^2/\sigma^2`) is too large where the chain goes, and can overflow. At the RMS residual
        the curvature is larger and the step smaller."""
        values = {name: value.to(self.x.dtype) for name, value in values.items()}
        if self.latent_priors:
            with torch.no_grad():
                values |= self.model.likelihood.most_likely_latents(self.model.forward(self.x, values), self.y)
        return self.unconstrained(values)

    def unconstrained(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        r"""Site values ``(C, *site_shape)`` in the model's space as ``z`` ``(C, D)`` (:math:`z_\sigma = \log\sigma`),
        the inverse of :meth:`constrained`."""
        pieces = [self.to_support[name].inv(values[name]) if name in self.to_support else values[name]
                  for name in self.shapes]
        num_chains = pieces[0].shape[0]
        return torch.cat([piece.reshape(num_chains, -1) for piece in pieces], dim=-1).to(self.x.dtype)

    # ------------------------------------------------------------- minibatches
    def next_batches(self, num_chains: int) -> torch.Tensor | None:
        """Each chain's next minibatch, indices ``(C, |B|)``; ``None`` for full batches."""
        if self.batch_size == self.num_data:
            return None
        if self._permutations is None or self._position + self.batch_size > self.num_data:
            self._permutations = torch.argsort(torch.rand(num_chains, self.num_data), dim=-1)
            self._position = 0
        batch = self._permutations[:, self._position:self._position + self.batch_size]
        self._position += self.batch_size
        return batch

    # --------------------------------------------------------------- density
    def log_joint(self, z: torch.Tensor, batches: torch.Tensor | None) -> torch.Tensor:
        r""":math:`\log\hat\pi` of each chain, ``(C,)``, on its minibatch ``batches[c]``; for ``None`` the exact log joint
        on all the data, whatever the batch size."""
        values = self.split(z)
        total = (self.gaussian_prior.log_prob(z[:, self.weight_span]) if self.gaussian_prior is not None
                 else sum(prior.log_prob(values[name]).reshape(z.shape[0], -1).sum(-1)  # (C,), a 0-dim site's too
                          for name, prior in self.weight_priors.items()))
        for name, transform in self.to_support.items():
            unconstrained, value = values[name], transform(values[name])
            jacobian = transform.log_abs_det_jacobian(unconstrained, value)
            total = total + (self.latent_priors[name].log_prob(value) + jacobian).reshape(z.shape[0], -1).sum(-1)
            values[name] = value
        if batches is None:
            f, y = self.model.forward(self.x, values), self.y
        else:
            f = torch.stack([self.model.forward(self.x[batch], {name: value[chain] for name, value in values.items()})
                             for chain, batch in enumerate(batches)])
            y = self.y[batches]
        log_likelihood = self.model.likelihood.distribution(f, self.model.likelihood_latents(values)).log_prob(y)
        return total + log_likelihood.sum(-1) * (self.num_data / (log_likelihood.shape[-1] * self.temperature))

    def gradient(self, z: torch.Tensor, batches: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        r"""``(log_joint, gradient)``: :math:`\log\hat\pi` ``(C,)`` and :math:`\nabla_z\log\hat\pi` ``(C, D)``, detached."""
        z = z.detach().requires_grad_()
        with torch.enable_grad():
            value = self.log_joint(z, batches)
            (gradient,) = torch.autograd.grad(value.sum(), z)
        return value.detach(), gradient
