"""ArviZ pictures of the weights across fits: forest, traces, and marginals against the prior."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.figure_files import save_figure

from bnn.runtime.arviz_quiet import quiet_arviz
from bnn.runtime.lazy_arviz import az

SHOWN_WEIGHTS = 4


def _output_weight_and_bias(posterior: Posterior):
    """The output layer's first weight site (two or more dimensions) and its first bias-like site (one dimension)."""
    sites = posterior.model.output_sites()
    weight = next(site for site in sites if len(site.shape) >= 2)
    bias = next((site for site in sites if len(site.shape) == 1), None)
    return weight, bias


def shown_weights(posterior: Posterior) -> list[tuple[str, tuple[int, ...]]]:
    """A handful of scalar weights: the first output unit's incoming weights, then its bias."""
    weight, bias = _output_weight_and_bias(posterior)
    count = min(SHOWN_WEIGHTS, weight.shape[-1])
    lead = (0,) * (len(weight.shape) - 1)
    return [(weight.name, (*lead, j)) for j in range(count)] + ([(bias.name, (0,))] if bias is not None else [])


def _selection(posterior: Posterior) -> tuple[list[str], dict[str, list[int]]]:
    weight, bias = _output_weight_and_bias(posterior)
    dims = len(weight.shape)
    coords = {f"{weight.name}_dim_{d}": [0] for d in range(dims - 1)}
    coords[f"{weight.name}_dim_{dims - 1}"] = list(range(min(SHOWN_WEIGHTS, weight.shape[-1])))
    names = [weight.name]
    if bias is not None:
        names.append(bias.name)
        coords[f"{bias.name}_dim_0"] = [0]
    return names, coords


def plot_forest(posteriors: Mapping[str, Posterior], path: str | Path) -> Path:
    """``az.plot_forest`` of the shown weights, one row per fit (94% HDI and interquartile range)."""
    first = next(iter(posteriors.values()))
    names, coords = _selection(first)
    with quiet_arviz():
        axes = az.plot_forest([p.to_inference_data() for p in posteriors.values()], model_names=list(posteriors),
                              var_names=names, coords=coords, combined=True, figsize=(7, 1.2 + 0.9 * len(posteriors) * 2))
    return save_figure(np.ravel(axes)[0].figure, path)


def plot_trace(posterior: Posterior, path: str | Path) -> Path:
    """``az.plot_trace`` of the shown weights of one fit (per chain for MCMC, draw order for the rest).

    The draws are plotted in float64: a chain that stopped moving (every step rejected or diverging) holds float32
    values a few units in the last place apart, a range in which ArviZ's density estimate cannot place its 512
    float32 bins (NumPy raises), while in float64 it can."""
    names, coords = _selection(posterior)
    idata = posterior.to_inference_data()
    idata.posterior = idata.posterior.astype("float64")
    with quiet_arviz():
        axes = az.plot_trace(idata, var_names=names, coords=coords, compact=True, figsize=(9, 4))
    return save_figure(np.ravel(axes)[0].figure, path)


def plot_marginals_vs_prior(posteriors: Mapping[str, Posterior], path: str | Path) -> Path:
    """Histogram of each shown weight under each fit, with the prior density as a black line (none for a weight of a
    hierarchical prior, whose marginal prior has no closed form)."""
    first = next(iter(posteriors.values()))
    weights = shown_weights(first)
    figure, axes = plt.subplots(1, len(weights), figsize=(3.2 * len(weights), 3), squeeze=False)
    for axis, (name, index) in zip(axes[0], weights):
        values = {label: p.draws()[name][(slice(None), *index)].numpy() for label, p in posteriors.items()}
        span = np.concatenate(list(values.values()))
        low, high = np.quantile(span, [0.005, 0.995])
        pad = 0.5 * (high - low) + 1e-3
        grid = torch.linspace(low - pad, high + pad, 300)
        for color, (label, draws) in enumerate(values.items()):
            axis.hist(draws, bins=40, range=(low - pad, high + pad), density=True, alpha=0.35, color=f"C{color}",
                      label=label)
        site = next(s for s in first.model.sites if s.name == name)
        if name not in first.model.hierarchical_sites:  # a hierarchical prior's marginal has no closed-form density
            prior = first.model.prior[name].distribution(site)
            density = prior.log_prob(grid.reshape(-1, *([1] * len(site.shape))).expand(-1, *site.shape)).exp()
            axis.plot(grid.numpy(), density[(slice(None), *index)].numpy(), "k-", lw=1, label="prior")
        axis.set(title=f"{name}{list(index)}", yticks=[])
    axes[0][0].legend(fontsize="x-small")
    return save_figure(figure, path)
