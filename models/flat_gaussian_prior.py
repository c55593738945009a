r"""A network's Gaussian prior over its flat weights in closed form: the log density the gradient methods add at every
step, without building a torch distribution per site.

Where every weight site's prior states a :class:`~bnn.models.fast_forms.NormalForm`
(:meth:`~bnn.models.priors.Prior.fast_form`: :math:`w_k \sim \mathcal{N}(m_k, s_k^2)`, the Gaussian priors), the log
prior of the flat weights :math:`\theta \in \mathbb{R}^D` (:mod:`bnn.guides.flat_weights`) is

.. math::

    \log p(\theta) = -\frac{1}{2} \sum_{k=1}^{D} \frac{(\theta_k - m_k)^2}{s_k^2}
    - \sum_{k=1}^{D} \log s_k - \frac{D}{2} \log 2\pi,

one fused expression over :math:`\theta`, equal to the sum of the sites' ``Normal.log_prob`` and a fraction of its
cost (the per-site distributions cost as much as a small network's likelihood).
"""

from __future__ import annotations

import math

import torch
from bnn.models.fast_forms import NormalForm


class FlatGaussianPrior:
    r""":math:`\log p(\theta)` of a Gaussian prior over the flat weights (module notes).

    Parameters
    ----------
    loc, scale : torch.Tensor
        :math:`m` and :math:`s`, each ``(D,)``, in the flat order of the sites.
    """

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        self.loc = loc.to(torch.float64)
        self.precision = scale.to(torch.float64).pow(-2)
        self.log_normaliser = float(-scale.to(torch.float64).log().sum() - 0.5 * math.log(2 * math.pi) * scale.numel())
        self._cast: dict[tuple[torch.dtype, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def of(cls, model) -> FlatGaussianPrior | None:
        """The closed form of ``model``'s prior over its weight sites, or ``None`` where a site's prior states no
        :class:`~bnn.models.fast_forms.NormalForm`."""
        forms = [model.prior[site.name].fast_form(site) for site in model.sites]
        if not forms or not all(isinstance(form, NormalForm) for form in forms):
            return None
        def flat(part: str) -> torch.Tensor:
            return torch.cat([torch.as_tensor(getattr(form, part)).expand(site.shape).reshape(-1)
                              for form, site in zip(forms, model.sites)])

        return cls(flat("loc"), flat("scale"))

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        r""":math:`\log p(\theta)` of ``theta`` ``(*sample, D)``, shaped ``sample``, in ``theta``'s dtype and device."""
        key = (theta.dtype, theta.device)
        if key not in self._cast:
            self._cast[key] = (self.loc.to(theta), self.precision.to(theta))
        loc, precision = self._cast[key]
        return -0.5 * ((theta - loc).pow(2) * precision).sum(-1) + self.log_normaliser
