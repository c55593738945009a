r"""The linearised (GLM) predictive of a Laplace posterior.

Linearising the network at :math:`\theta_{MAP}`,
:math:`f(x; \theta) \approx f(x; \theta_{MAP}) + J(x)(\theta - \theta_{MAP})`, turns
:math:`\theta \sim \mathcal{N}(\theta_{MAP}, \Lambda^{-1})` into a Gaussian over outputs,

.. math::

    f^* \sim \mathcal{N}\big(\mu^*, \Sigma^*\big),\qquad \mu^* = f(x^*; \theta_{MAP}),\quad
    \Sigma^* = J(x^*)\,\Lambda^{-1} J(x^*)^\top \quad (K \times K \text{ per input}),

with :math:`J` over the weights the approximation covers. The predictive then is

* regression: :math:`y^* \sim \mathcal{N}(\mu^*, \sigma^2 + \mathrm{diag}\,\Sigma^*)`, in closed form;
* binary: the probit approximation
  :math:`p(y^* = 1) \approx \mathrm{sigmoid}\big(\mu^* / \sqrt{1 + \tfrac{\pi}{8} \Sigma^*}\big)`;
* K classes, ``link_approx="probit"`` (the default): the multi-class probit approximation (Gibbs 1997;
  laplace-torch's ``probit`` link)
  :math:`p(y^* = k) \approx \mathrm{softmax}_k\big(\mu^*_k / \sqrt{1 + \tfrac{\pi}{8} \Sigma^*_{kk}}\big)`,
  which ignores the correlations between the logits;
* K classes, ``link_approx="bridge"``: the Laplace bridge (Hobbhahn, Kristiadi and Hennig 2022; laplace-torch's
  ``bridge`` link), the Dirichlet whose logistic-normal approximation matches the logits' Gaussian, after the
  Gaussian is moved to zero-sum logits (the softmax ignores a common shift),

  .. math::

      \tilde\mu = \mu^* - \frac{\Sigma^*\mathbf 1\, \mathbf 1^\top\mu^*}{\mathbf 1^\top\Sigma^*\mathbf 1},\quad
      \tilde\Sigma = \Sigma^* - \frac{\Sigma^*\mathbf 1\, \mathbf 1^\top\Sigma^*}{\mathbf 1^\top\Sigma^*\mathbf 1},\quad
      \alpha_k = \frac{1}{\tilde\Sigma_{kk}}\Big(1 - \frac2K + \frac{e^{\tilde\mu_k}}{K^2}
      \sum_l e^{-\tilde\mu_l}\Big),\quad p(y^* = k) \approx \frac{\alpha_k}{\sum_l \alpha_l},

  the Dirichlet's mean.

The draws of a :class:`~bnn.inference.core.prediction.Prediction` are exact draws of :math:`f^*` from
the Gaussian above and of :math:`y^*` given them (regression) or from the probit
probabilities (classification); a classifier's ``epistemic_std`` is the spread, over the
draws of :math:`f^*`, of the label's conditional mean.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyro.distributions as dist
import torch
from bnn.guides.flat_weights import join_sites, split_flat
from bnn.guides.kron_covariance import KronCovariance
from bnn.guides.laplace import LaplaceGuide
from bnn.inference.core.prediction import Prediction, entropy_split
from bnn.inference.laplace.curvature import output_jacobian, rows_per_chunk
from bnn.models.likelihoods import BernoulliLikelihood, CategoricalLikelihood, GaussianLikelihood, Likelihood

from bnn.options import positive_int

LINEARIZED_LIKELIHOODS = (GaussianLikelihood, BernoulliLikelihood, CategoricalLikelihood)
"""The likelihoods whose predictive has the closed forms of the module notes."""


def is_linearizable(likelihood: Likelihood) -> bool:
    """Whether the linearised predictive has the closed form of the module notes for ``likelihood``."""
    return type(likelihood) in LINEARIZED_LIKELIHOODS


def _label_moments(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of the label under class probabilities ``(..., K)``."""
    labels = torch.arange(probs.shape[-1], dtype=probs.dtype)
    mean = (probs * labels).sum(-1)
    return mean, (probs * labels**2).sum(-1) - mean**2


def laplace_bridge(mean: torch.Tensor, cov: torch.Tensor) -> torch.Tensor:
    """The Laplace bridge's class probabilities (module notes) from the logits' means ``(n, K)`` and covariances
    ``(n, K, K)``; an input whose logits have no variance left after the zero-sum move gets equal probabilities
    (laplace-torch's ``nan_to_num``)."""
    row_sums, total = cov.sum(-1), cov.sum(dim=(-2, -1))
    mean = mean - row_sums * mean.sum(-1, keepdim=True) / total[:, None]
    cov = cov - torch.einsum("bi,bj->bij", row_sums, cov.sum(-2)) / total[:, None, None]
    classes = mean.shape[-1]
    variance = torch.diagonal(cov, dim1=-2, dim2=-1)
    alpha = (1 - 2 / classes + mean.exp() / classes**2 * torch.exp(-mean).sum(-1, keepdim=True)) / variance
    return torch.nan_to_num(alpha / alpha.sum(-1, keepdim=True), nan=1.0)


JITTERS = (1e-8, 1e-6, 1e-4)
"""The jitters, relative to the mean variance, that :func:`psd_cholesky` tries in turn."""


def psd_cholesky(cov: torch.Tensor) -> torch.Tensor:
    r"""The Cholesky factor of each covariance :math:`J \Sigma J^\top` in ``cov`` ``(..., K, K)``.

    The matrices are positive semi-definite by construction, but with many outputs (ten classes) rounding can leave an
    eigenvalue a hair below zero, where :func:`torch.linalg.cholesky` fails. Such a matrix gets the smallest jitter
    :math:`\epsilon \bar\sigma^2 I` of :data:`JITTERS` (:math:`\bar\sigma^2` its mean variance) that makes it
    factorise; a matrix that factorises is left exactly as it is.

    Raises
    ------
    ValueError
        Where even the largest jitter leaves a matrix that does not factorise (not finite, or far from
        positive semi-definite).
    """
    factor, info = torch.linalg.cholesky_ex(cov)
    failed = info > 0
    scale = torch.diagonal(cov, dim1=-2, dim2=-1).mean(-1).clamp(min=torch.finfo(cov.dtype).tiny)
    identity = torch.eye(cov.shape[-1], dtype=cov.dtype)
    for jitter in JITTERS:
        if not failed.any():
            return factor
        jittered, info = torch.linalg.cholesky_ex(cov[failed] + jitter * scale[failed, None, None] * identity)
        factor[failed] = jittered
        still = failed.clone()
        still[failed] = info > 0
        failed = still
    if failed.any():
        raise ValueError(f"the linearised predictive's output covariance at {int(failed.sum())} inputs is not positive "
                         "semi-definite even with a jitter of 1e-4 of its variance (not finite?): check the fit")
    return factor


class Linearization:
    """The GLM predictive of the Gaussian over weights held by a :class:`~bnn.guides.laplace.LaplaceGuide`."""

    def __init__(self, guide: LaplaceGuide, link_approx: str = "probit") -> None:
        self.guide, self.link_approx = guide, link_approx

    def _row_chunks(self, model, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x`` in chunks of rows whose Jacobians fit the memory budget (:func:`rows_per_chunk`): the predictive's
        batches, so that its memory grows with the chunk and the weights, not with the rows."""
        theta, start = self.guide.mean, self.guide.covered_from
        return x.split(rows_per_chunk(model, theta.shape[0] - start, theta.element_size()))

    def _jacobian(self, model, x: torch.Tensor) -> torch.Tensor:
        """:math:`J(x)` over the covered weights, ``(n, K, covered)``, for one chunk of rows: the Jacobian over the
        weights from ``covered_from`` on, cut to a subnetwork's ``indices``."""
        jacobian = output_jacobian(model, x, self.guide.mean, self.guide.covered_from)
        return jacobian if self.guide.indices is None else jacobian[..., self.guide.indices]

    def map_output(self, model, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\mu^* = f(x; \theta_{MAP})` of shape ``(n, K)``, a chunk of rows at a time."""
        values = split_flat(model.sites, self.guide.mean)
        return torch.cat([model.forward(chunk, values) for chunk in self._row_chunks(model, x)])

    def output_moments(self, model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r""":math:`\mu^*` of shape ``(n, K)`` and :math:`\Sigma^*` of shape ``(n, K, K)`` at inputs ``x``."""
        pieces = []
        for chunk in self._row_chunks(model, x):
            scaled = self.guide.times_scale(self._jacobian(model, chunk))
            pieces.append(scaled @ scaled.transpose(-1, -2))
        return self.map_output(model, x), torch.cat(pieces)

    def function_draws(self, model, x: torch.Tensor, values: dict[str, torch.Tensor]) -> torch.Tensor:
        r"""The linearised network at weight draws :math:`\theta_s`, shape ``(S, n, K)``:
        :math:`f(x; \theta_{MAP}) + J(x)(\theta_s - \theta_{MAP})`, the function whose
        likelihood the linearised predictive integrates (weights outside the covered block stay at the MAP).

        ``values`` maps each weight site to its draws ``(S, *site.shape)``.
        """
        offset = self.guide.covered_part(join_sites(model.sites, values) - self.guide.mean)
        with torch.no_grad():
            moved = [torch.einsum("nkp,sp->snk", self._jacobian(model, chunk), offset)
                     for chunk in self._row_chunks(model, x)]
            return self.map_output(model, x) + torch.cat(moved, dim=1)

    def predict(self, model, x: torch.Tensor, num_samples: int) -> Prediction:
        """The linearised predictive at ``x`` with ``num_samples`` draws (uses the global random state)."""
        positive_int("num_samples", num_samples)
        with torch.no_grad():
            mean, cov = self.output_moments(model, x)
            f = dist.MultivariateNormal(mean, scale_tril=psd_cholesky(cov)).sample((num_samples,))
            variance = torch.diagonal(cov, dim1=-2, dim2=-1)
            task = model.likelihood.task
            if task == "regression":
                noise = torch.as_tensor(model.likelihood.noise_scale(self.guide.constants), dtype=mean.dtype)
                draws = f + noise * torch.randn_like(f)
                squeeze = (lambda t: t[..., 0]) if mean.shape[-1] == 1 else (lambda t: t)  # noqa: E731
                std = (variance + noise**2).sqrt()
                return Prediction(squeeze(draws), f, squeeze(mean), squeeze(std), squeeze(variance.sqrt()))
            probit = mean / (1 + math.pi / 8 * variance).sqrt()
            if task == "binary":
                probs = torch.sigmoid(probit[:, 0])
                class_probs = torch.stack([1 - probs, probs], dim=-1)
                draws = torch.bernoulli(probs.expand(num_samples, -1))
                per_draw = torch.sigmoid(f[..., 0])
                per_draw = torch.stack([1 - per_draw, per_draw], dim=-1)
            else:
                probs = class_probs = (laplace_bridge(mean, cov) if self.link_approx == "bridge"
                                       else torch.softmax(probit, dim=-1))
                draws = dist.Categorical(probs).sample((num_samples,))
                per_draw = torch.softmax(f, dim=-1)
            label_mean, label_variance = _label_moments(class_probs)
            epistemic = _label_moments(per_draw)[0].std(0, unbiased=False)
            return Prediction(draws, f, label_mean, label_variance.sqrt(), epistemic, probs,
                              *entropy_split(per_draw, class_probs))

    # ------------------------------------------------------------ save/load
    def nbytes(self) -> int:
        """About the bytes :meth:`save` writes: the Gaussian's mean and scale (the rest is small)."""
        return self.guide.mean.nbytes + self.guide.scale.nbytes

    def save(self, path: str | Path) -> None:
        """Write the Gaussian over weights to ``path`` (tensors only; read back without pickle)."""
        torch.save(self.guide.state(), path)

    @classmethod
    def load(cls, path: str | Path, model, link_approx: str = "probit") -> Linearization:
        """Read what :meth:`save` wrote, for ``model``, in the default dtype, predicting through ``link_approx``.

        Raises
        ------
        ValueError
            When ``path`` is not a readable tensor file, or does not hold this model's Gaussian
            (damaged, or written by another version or for another model).
        """
        fix = "it is damaged or from another version or model; fit and save the posterior again"
        try:
            state = torch.load(path, weights_only=True)  # tensors and plain containers only: runs no code
        except Exception as error:  # noqa: BLE001 - a damaged zip or pickle raises many types
            raise ValueError(f"{path} cannot be read as a linearisation ({type(error).__name__}); {fix}") from None
        dtype = torch.get_default_dtype()
        try:
            scale = state["scale"]
            scale = KronCovariance.from_state(scale) if isinstance(scale, dict) else scale
            state["mean"], state["scale"] = state["mean"].to(dtype), scale.to(dtype)
            state["constants"] = {name: value.to(dtype) for name, value in state["constants"].items()}
            return cls(LaplaceGuide.from_state(model.sites, state), link_approx)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path} does not hold a linearisation for this model ({type(error).__name__}: {error}); "
                             f"{fix}") from None
