"""``compare``'s reference posterior (``--reference``): a fit of the comparison named by its label, or a saved fit
read from its folder, and the report's section on each fit's distance from it
(:func:`~bnn.inference.evaluation.fidelity.fidelity`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch

from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.fidelity import fidelity, reference_problems


def saved_reference(path: Path, network, dataset: Dataset) -> Posterior:
    """The posterior saved in ``path`` (:meth:`~bnn.inference.core.posterior.Posterior.save`), checked to be of
    ``network`` on ``dataset``'s training split and to pass its own check at the test inputs, before any fit.

    Raises
    ------
    ValueError
        For a folder that does not hold a saved fit, one of another network or data, or a reference that fails its
        own check (which check).
    """
    reference = Posterior.load(path, module=network.state_module())
    if reference.model.config() != network.config():
        raise ValueError(f"the reference in {path} is a fit of another network ({reference.model!r}), not of this "
                         f"comparison's {network!r}: fit the reference with the same model flags")
    if reference.x.shape != dataset.x_train.shape or not torch.equal(reference.x, dataset.x_train.to(reference.x.dtype)):
        raise ValueError(f"the reference in {path} was fitted to other training data than {dataset.name}'s training "
                         "split: fit it with the same --dataset, --split and --seed")
    problems = reference_problems(reference, reference.predict(dataset.x_test).f)
    if problems:
        raise ValueError(f"the {reference.method} posterior in {path} is refused as a reference: {'; '.join(problems)}")
    return reference


def reference_distances(posteriors: Mapping[str, Posterior], reference: Posterior, label: str,
                        dataset: Dataset) -> tuple[pd.DataFrame | None, list[str]]:
    """Each fit's distance from ``reference`` (labelled ``label``) at the test inputs, and the opening of the report's
    section: its title and how to read the table, or why the reference was refused (the table is then ``None``)."""
    others = {name: posterior for name, posterior in posteriors.items() if posterior is not reference}
    title = f"## Distance from the reference ({label})"
    try:
        distances = fidelity(reference, others, dataset.x_test)
    except ValueError as error:
        return None, [title, f"**Warning: no distances: {error}**"]
    reading = ("The 2-Wasserstein distance between each fit's predictive distribution of y and the reference's, and the "
               "ratio of their standard deviations, averaged over the test inputs (units of the fitted target)"
               if dataset.task == "regression" else
               "The share of test inputs where each fit's most probable class is the reference's, and the total "
               "variation between their predictive class probabilities, averaged over the test inputs")
    return distances, [title, reading + "; each with its Monte Carlo standard error (`_se`: a jackknife over blocks "
                       "of both fits' draws). A fit can score a good test LL far from the posterior it approximates."]
