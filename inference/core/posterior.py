r"""The one result type of every inference method: draws from :math:`p(W \mid \mathcal{D})` or its approximation.

A :class:`Posterior` holds ``(chains, draws)`` samples of every latent site of the
model, whatever method made them (SVI draws from the fitted guide, NUTS its Markov
chains, Laplace draws from :math:`\mathcal{N}(W_{MAP}, \Lambda^{-1})`), plus the
training data. Everything downstream (predictions, ArviZ, saving) works on the draws,
so it is method-agnostic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from bnn.inference.core.posterior_files import read_posterior, write_netcdf, write_posterior
from bnn.inference.core.prediction import Prediction, PredictiveType, log_predictive_density, summarise
from bnn.inference.core.record import FitRecord
from bnn.inference.core.weight_gaussians import weight_gaussians
from bnn.inference.diagnostics.draws_summary import draws_summary
from bnn.models.draw_batches import draw_batches
from bnn.models.network import OBSERVED_SITE, BayesianNetwork
from bnn.models.posterior_prior import PosteriorPrior

from bnn.options import parse_option
from bnn.runtime.atomic import atomic_directory
from bnn.runtime.lazy_arviz import az
from bnn.runtime.seeding import seeded


class LinearizedPredictive(Protocol):
    """A method's linearised (GLM) predictive, as :class:`Posterior` uses it (Laplace has one)."""

    def predict(self, model: BayesianNetwork, x: torch.Tensor, num_samples: int) -> Prediction: ...

    def function_draws(self, model: BayesianNetwork, x: torch.Tensor, values: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def save(self, path: Path) -> None: ...


class Posterior:
    """Posterior draws of a model's latent sites with the data they were conditioned on.

    Parameters
    ----------
    model : BayesianNetwork
        The model that was fitted (``fit`` passes its copy of the user's model, taken when the fit started).
    samples : mapping of str to torch.Tensor
        For each latent site, draws of shape ``(chains, draws, *site_shape)``.
    x, y : torch.Tensor
        The training inputs and targets.
    record : FitRecord
        What the fit recorded about itself, a dataclass per method (:mod:`bnn.inference.core.record`): the seed,
        the time, and the method's own entries (the ELBO history of SVI, the diagnostics of NUTS, ...).
    sample_stats : mapping of str to array, optional
        Per-draw sampler statistics ``(chains, draws)`` (NUTS), stored in ArviZ's
        ``sample_stats`` group.
    extras : dict, optional
        Live objects of the method kept for the user (SVI's guide, bound to its own parameters,
        and its parameter store state); not saved.
    linearization : LinearizedPredictive, optional
        The method's linearised (GLM) predictive (Laplace); saved as ``linearization.pt``.
    constants : mapping of str to array, optional
        Fitted arrays of the method that are not draws (the empirical-Bayes guide's
        ``prior_variance.<site>``); saved next to ``x`` in ArviZ's ``constant_data`` group.
    """

    def __init__(
        self,
        model: BayesianNetwork,
        samples: Mapping[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        record: FitRecord,
        sample_stats: Mapping[str, Any] | None = None,
        extras: dict[str, Any] | None = None,
        linearization: LinearizedPredictive | None = None,
        constants: Mapping[str, Any] | None = None,
    ) -> None:
        shapes = model.latent_shapes
        missing = set(shapes) - set(samples)
        if missing:
            raise ValueError(f"samples lack the latent sites {sorted(missing)}")
        leads = {tuple(v.shape[:2]) for v in samples.values()}
        if len(leads) != 1:
            raise ValueError(f"all sites need the same (chains, draws) leading shape, got {sorted(leads)}")
        for name, shape in shapes.items():
            if tuple(samples[name].shape[2:]) != tuple(shape):
                raise ValueError(f"site {name}: draws have shape {tuple(samples[name].shape[2:])}, expected {tuple(shape)}")
        self.model = model
        self.samples = {name: samples[name].detach() for name in shapes}
        self.x, self.y = x, y
        self.record = record
        self.sample_stats = dict(sample_stats or {})
        self.extras = dict(extras or {})
        self.linearization = linearization
        self.constants = {name: np.asarray(torch.as_tensor(v).detach().cpu()) for name, v in (constants or {}).items()}
        self._inference_data: az.InferenceData | None = None
        self._loo: az.ELPDData | None = None

    @property
    def default_predictive(self) -> PredictiveType:
        """The linearised predictive where the method has one (Laplace: sampling weights from a
        Laplace posterior of a non-linear net is known to under-fit), else Monte Carlo."""
        return PredictiveType.MC if self.linearization is None else PredictiveType.LINEARIZED

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def num_chains(self) -> int:
        return next(iter(self.samples.values())).shape[0]

    @property
    def num_draws(self) -> int:
        """Draws per chain."""
        return next(iter(self.samples.values())).shape[1]

    def draws(self, num_samples: int | None = None) -> dict[str, torch.Tensor]:
        """Draws with chains merged, ``(S, *site_shape)``; ``num_samples`` thins evenly."""
        total = self.num_chains * self.num_draws
        if num_samples is None:
            num_samples = total
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or not 0 < num_samples <= total:
            raise ValueError(
                f"num_samples must be an integer in 1..{total} (the draws this posterior holds), "
                f"got {num_samples!r}; refit with more draws for more"
            )
        index = torch.linspace(0, total - 1, num_samples).round().long()
        return {name: value.reshape(total, *value.shape[2:])[index] for name, value in self.samples.items()}

    def predict(
        self, x: torch.Tensor, num_samples: int | None = None, *, seed: int | None = None,
        predictive: PredictiveType | str | None = None,
    ) -> Prediction:
        """Posterior predictive at inputs ``x`` of shape ``(n, in_features)``.

        ``predictive`` is a :class:`PredictiveType`; by default the method's own choice,
        :attr:`default_predictive`.
        """
        from bnn.datasets.validation import as_float_tensor

        x = as_float_tensor(x, "inputs x")
        if self._predictive(predictive) is PredictiveType.LINEARIZED:
            with seeded(self.record.seed if seed is None else seed):
                total = self.num_chains * self.num_draws
                return self.linearization.predict(self.model, x, total if num_samples is None else num_samples)
        values = self.draws(num_samples)
        with torch.no_grad(), seeded(self.record.seed if seed is None else seed):
            f = torch.cat([self.model.forward(x, batch) for batch in draw_batches(self.model, x.shape[0], values)])
            observation = self.model.likelihood.distribution(f, self.model.likelihood_latents(values))
            return summarise(self.model.likelihood.task, observation, f)

    def _predictive(self, predictive: PredictiveType | str | None) -> PredictiveType:
        """``predictive`` checked against what this posterior has; ``None`` is :attr:`default_predictive`."""
        if predictive is None:
            return self.default_predictive
        predictive = parse_option(PredictiveType, predictive, "predictive")
        if predictive is PredictiveType.LINEARIZED and self.linearization is None:
            raise ValueError(f"method {self.method!r} has no linearised predictive; use predictive='mc' "
                             "(or fit with method='laplace')")
        return predictive

    def function_draws(self, x: torch.Tensor, values: dict[str, torch.Tensor],
                       predictive: PredictiveType | str | None = None) -> torch.Tensor:
        r"""Network outputs at the draws ``values`` (``(S, *shape)`` per site), ``(S, n, K)``: :math:`f(x; W_s)`,
        or the network linearised at the MAP for ``predictive="linearized"`` (the default where the method
        has it, so that the log-likelihood ArviZ's LOO and WAIC read belongs to the predictive the method reports)."""
        if self._predictive(predictive) is PredictiveType.LINEARIZED:
            return self.linearization.function_draws(self.model, x, values)
        with torch.no_grad():
            return self.model.forward(x, values)

    def _batches(self, x: torch.Tensor, predictive: PredictiveType | str | None = None) -> Iterator:
        r"""``(draws, f)`` a batch of the draws (chains merged, in order) at a time
        (:func:`~bnn.models.draw_batches.draw_batches`), with their :meth:`function_draws` at ``x``."""
        values = {name: v.reshape(-1, *v.shape[2:]) for name, v in self.samples.items()}
        for batch in draw_batches(self.model, x.shape[0], values):
            yield batch, self.function_draws(x, batch, predictive)

    def _observations(self, x: torch.Tensor, predictive: PredictiveType | str | None = None) -> Iterator:
        r"""The likelihood's distribution of :math:`y \mid x` at the draws, a batch of draws at a time
        (:meth:`_batches`)."""
        for batch, f in self._batches(x, predictive):
            yield self.model.likelihood.distribution(f, self.model.likelihood_latents(batch))

    def network_outputs(self, x: torch.Tensor, predictive: PredictiveType | str | None = None) -> torch.Tensor:
        r""":math:`f(x; W_{c,d})` at every draw, ``(chains, draws, n, K)`` (``predictive`` as in :meth:`function_draws`),
        computed a batch of draws at a time."""
        f = torch.cat([f for _, f in self._batches(x, predictive)])
        return f.reshape(self.num_chains, self.num_draws, *f.shape[1:])

    def pointwise_log_likelihood(self, x: torch.Tensor, y: torch.Tensor,
                                 predictive: PredictiveType | str | None = None) -> torch.Tensor:
        r""":math:`\log p(y_i \mid x_i, W_{c,d})` of shape ``(chains, draws, n)`` (``predictive`` as in
        :meth:`function_draws`)."""
        with torch.no_grad():
            log_lik = torch.cat([observation.log_prob(y).reshape(-1, x.shape[0])
                                 for observation in self._observations(x, predictive)])
        return log_lik.reshape(self.num_chains, self.num_draws, -1)

    def log_predictive_density(self, x: torch.Tensor, y: torch.Tensor,
                               predictive: PredictiveType | str | None = None) -> torch.Tensor:
        r"""Per point :math:`\log p(y_i \mid x_i, \mathcal{D})`, the Monte Carlo mixture over all draws."""
        return log_predictive_density(self.pointwise_log_likelihood(x, y, predictive).flatten(0, 1))

    def as_prior(self, *, moment_matching: bool = False) -> PosteriorPrior:
        r"""This posterior as a prior :math:`\prod_k \mathcal{N}(m_k, s_k^2)` over the weights, for the next task.

        From a mean-field guide its own means and scales, from a Laplace posterior the diagonal of its precision,
        from any draws their moments when ``moment_matching`` (:mod:`bnn.inference.core.weight_gaussians`); assign it
        with ``model.prior = posterior.as_prior()``. Raises ``ValueError`` for a posterior without a Gaussian guide
        unless ``moment_matching``.
        """
        return weight_gaussians(self, moment_matching=moment_matching)

    # ------------------------------------------------------------------ ArviZ
    def to_inference_data(self) -> az.InferenceData:
        """ArviZ InferenceData with posterior, posterior_predictive, log_likelihood,
        observed_data, constant_data (the inputs) and, where the method has them, sample_stats.

        Built once (the log-likelihood and a simulated data set at every draw and training row: on a large data set
        the dearest step of a report, which reads it for the metrics, the ranking, the file and two plots) and
        returned as a copy, so that a caller's changes stay its own. A posterior's draws, data and model are not
        changed after it is made."""
        return self._built_inference_data().copy()

    def loo(self) -> az.ELPDData:
        """PSIS-LOO of the training data, pointwise (``az.loo(idata, pointwise=True)`` of :meth:`to_inference_data`),
        computed once: a report reads it for its table and its ranking. ArviZ's reliability warnings are raised at
        that first call (the Pareto :math:`k` of every point are in the result)."""
        if self._loo is None:
            self._loo = az.loo(self._built_inference_data(), pointwise=True)  # reads it, no copy needed
        return self._loo

    def _built_inference_data(self) -> az.InferenceData:
        """The InferenceData of :meth:`to_inference_data`, built at the first call (the object kept, not a copy)."""
        if self._inference_data is None:
            self._inference_data = self._build_inference_data()
        return self._inference_data

    def _build_inference_data(self) -> az.InferenceData:
        with torch.no_grad(), seeded(self.record.seed):
            predictive, log_lik = [], []
            for observation in self._observations(self.x):
                predictive.append(observation.sample())
                log_lik.append(observation.log_prob(self.y))
            predictive, log_lik = torch.cat(predictive), torch.cat(log_lik)
        chains_draws = (self.num_chains, self.num_draws)

        def as_numpy(tensor: torch.Tensor) -> np.ndarray:
            return tensor.reshape(*chains_draws, *tensor.shape[1:]).numpy()

        data_dims = ["example"] + (["output"] if self.y.dim() == 2 else [])
        return az.from_dict(
            posterior={name: v.numpy() for name, v in self.samples.items()},
            posterior_predictive={OBSERVED_SITE: as_numpy(predictive)},
            # float64: PSIS in float32 divides by zero on draws with very low log-likelihoods
            log_likelihood={OBSERVED_SITE: as_numpy(log_lik.double())},
            observed_data={OBSERVED_SITE: self.y.numpy()},
            constant_data={"x": self.x.numpy(), **self.constants},
            sample_stats={k: np.asarray(v) for k, v in self.sample_stats.items()} or None,
            dims={OBSERVED_SITE: data_dims, "x": ["example", "feature"]},
            attrs={"method": self.method, "guide": str(self.record.guide), "model": repr(self.model)},
        )

    def summary(self, **kwargs: Any):
        """``arviz.summary`` of the posterior (means, sds, HDIs, MCSEs, ESS, and R-hat where there are two
        chains or more: :func:`~bnn.inference.diagnostics.draws_summary.draws_summary`); ``kwargs`` go to ArviZ."""
        return draws_summary(self.to_inference_data(), **kwargs)

    # -------------------------------------------------------------- save/load
    def save(self, directory: str | Path, *, overwrite: bool = False, log_likelihood: bool = True) -> Path:
        """Write ``posterior.nc`` and ``fit.json`` into ``directory`` atomically.

        ``log_likelihood=False`` leaves the pointwise log-likelihood (draws x training rows, often the largest part of
        the file) out of ``posterior.nc``; :meth:`load` remakes it from the draws, as it does the posterior
        predictive."""
        with atomic_directory(directory, writer="Posterior.save", overwrite=overwrite) as staging:
            self.write_into(staging, log_likelihood=log_likelihood)
        return Path(directory)

    def to_netcdf(self, path: str | Path) -> None:
        """Write :meth:`to_inference_data` to the netCDF file ``path`` without what can be remade from the draws:
        not the ``posterior_predictive`` draws (one simulated data set per draw), and the pointwise log-likelihood
        (which PSIS-LOO and WAIC read) in float32. :meth:`load` remakes both; ArviZ reading the file directly should
        cast it first, ``idata.log_likelihood = idata.log_likelihood.astype("float64")`` (PSIS in float32 can divide
        by zero)."""
        write_netcdf(self.to_inference_data(), path)

    def write_into(self, folder: Path, *, log_likelihood: bool = True) -> None:
        """Write the files of :meth:`save` into an existing ``folder`` (used inside atomic writes)."""
        write_posterior(self, folder, log_likelihood)

    @classmethod
    def load(cls, directory: str | Path, *, module: torch.nn.Module | None = None, trust: bool = False) -> Posterior:
        """Read a posterior saved by :meth:`save` (:mod:`bnn.inference.core.posterior_files`): every file is checked
        against the SHA-256 its ``fit.json`` lists before any is read, and none runs code. The model is rebuilt from
        registered names; a network made from a torch module (:func:`~bnn.models.from_module`) from ``module``.

        Parameters
        ----------
        directory : str or Path
            The folder :meth:`save` wrote.
        module : torch.nn.Module, optional
            For a network made from a torch module: the module again (its class, built as for the fit); it must have
            the saved structure (``repr``), parameter names and shapes, and is filled with the saved tensors (a copy:
            ``module`` itself is not changed).
        trust : bool
            For such a network without ``module``: unpickle the module saved in ``module.pt``. Unpickling runs code
            named in the file: only for a folder you wrote yourself.

        Raises
        ------
        ValueError
            For a missing, damaged, changed or foreign folder, a file there that ``fit.json`` does not list, one
            written by another schema version; a torch module network without ``module`` (or ``trust``), or with
            another module (:class:`~bnn.models.network.ModuleMismatchError`).
        """
        return cls(**read_posterior(directory, module, trust))

    def __repr__(self) -> str:
        return (
            f"Posterior(method={self.method!r}, guide={self.record.guide!r}, chains={self.num_chains}, "
            f"draws={self.num_draws}, model={self.model!r})"
        )
