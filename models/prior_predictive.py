r"""Functions drawn from a network's prior: what a prior says about :math:`f` before any data.

A prior on the weights is a prior on functions. Drawing :math:`W^{(s)} \sim p(W)` from the model's prior (each
site from the prior its mapping gives it) and evaluating the network,

.. math::

    f^{(s)}(x) = f(x; W^{(s)}), \qquad s = 1, \dots, S,

gives :math:`S` draws of the prior predictive function at the inputs :math:`x`; their spread,
:math:`\operatorname{sd}_p f(x)`, is how far the prior lets the function move. For a linear network
:math:`f(x) = w^\top x + b` with :math:`w_j \sim \mathcal{N}(0, \sigma_w^2)` and :math:`b \sim \mathcal{N}(0, \sigma_b^2)`
it is exactly :math:`\operatorname{Var} f(x) = \sigma_b^2 + \sigma_w^2 \lVert x \rVert^2`; for a hidden layer of
width :math:`H` and an output layer of scale :math:`\sigma`, :math:`\operatorname{Var} f(x)` grows like
:math:`H \sigma^2`, which a fan-in scaled prior (:math:`\sigma^2 = s^2 / H`) cancels.
"""

from __future__ import annotations

import pyro
import torch
from bnn.models.network import BayesianNetwork, check_network

from bnn.options import positive_int
from bnn.options import seed as parse_seed


def prior_function_draws(model: BayesianNetwork, x: torch.Tensor, num_draws: int, seed: int) -> torch.Tensor:
    r"""``num_draws`` network outputs :math:`f(x; W^{(s)})` with :math:`W^{(s)}` drawn from ``model``'s prior.

    Every weight site is drawn from the prior ``model.prior`` gives it (so per-layer and per-site mappings and
    user-written priors are honoured; a hierarchical prior draws its scales, then the weights given them);
    likelihood latents (a learned noise) play no part in :math:`f`. The draws
    come from a torch generator state of their own, seeded by ``seed``: the caller's random state is left as it
    was, and Pyro's parameter store is not touched.

    Parameters
    ----------
    model : BayesianNetwork
        The network and its priors (any :class:`~bnn.models.network.BayesianNetwork`).
    x : torch.Tensor
        Inputs of shape ``(n, model.in_features)``, floating point and finite.
    num_draws : int
        Number of weight draws :math:`S \ge 1`.
    seed : int
        Non-negative seed; the same seed gives the same draws.

    Returns
    -------
    torch.Tensor
        The draws :math:`f^{(s)}(x_i)`, shape ``(num_draws, n, model.out_features)``, in the dtype of ``x``.

    Raises
    ------
    TypeError
        If ``model`` is not a :class:`~bnn.models.network.BayesianNetwork` or ``x`` is not a tensor.
    ValueError
        For ``x`` of the wrong shape, not floating point or not finite, and for ``num_draws`` or ``seed`` that
        are not a positive / non-negative integer; each raised before any draw.
    """
    check_network(model)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (n, {model.in_features}), got {type(x).__name__}; "
                        "use torch.as_tensor(x, dtype=torch.float32)")
    if x.dim() != 2 or x.shape[1] != model.in_features or x.shape[0] == 0:
        raise ValueError(f"x must have shape (n, {model.in_features}) with n >= 1 (one row per input), "
                         f"got {tuple(x.shape)}; reshape a 1-d input with x.reshape(-1, 1)")
    if not x.is_floating_point() or not bool(torch.isfinite(x).all()):
        raise ValueError(f"x must hold finite floating-point numbers, got dtype {x.dtype}"
                         f"{'' if not x.is_floating_point() else ' with NaN or infinite entries'}")
    num_draws = positive_int("num_draws", num_draws)
    seed = parse_seed("seed", seed)
    priors = model.prior
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model.hierarchical_sites:  # the program's own draws: the scales, then the weights given them
            with pyro.plate("prior_draws", num_draws, dim=-1):
                values = model.sample_latents()
            weights = {site.name: values[site.name].to(x.dtype) for site in model.sites}
        else:
            weights = {site.name: priors[site.name].distribution(site).sample((num_draws,)).to(x.dtype)
                       for site in model.sites}
    with torch.no_grad():
        return model.forward(x, weights)
