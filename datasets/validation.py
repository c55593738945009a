"""Checks on user data, run before any work starts, with errors that say what to fix."""

from __future__ import annotations

import numpy as np
import torch


def as_float_tensor(array, what: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``array`` as a float tensor (``dtype``, by default torch's) after checking it is numeric and finite.

    Raises
    ------
    ValueError
        For a tensor that is not on the CPU, non-numeric data, an empty array, NaN or infinite entries (the message names ``what``
        and the first offending row), or values beyond the largest number of torch's default dtype,
        which the model computes in (float32: about 3.4e38), even when ``dtype`` is wider.
    """
    if isinstance(array, torch.Tensor):
        if array.device.type != "cpu":
            raise ValueError(f"{what} is on the {array.device.type!r} device; the collection takes data on the CPU: "
                             "move it there first, for example x.cpu(), and choose where a fit computes with its "
                             "device option (device='cuda')")
        array = array.detach().numpy()
    try:
        values = np.asarray(array)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"{what} is ragged or not array-like: {error}") from None
    if values.dtype == object or not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise ValueError(f"{what} must be numeric, got dtype {values.dtype}")
    if np.iscomplexobj(values):
        raise ValueError(f"{what} must be real, got complex dtype {values.dtype}")
    if values.ndim == 0:
        raise ValueError(f"{what} is a scalar; pass an array with one row per example")
    if values.size == 0:
        raise ValueError(f"{what} is empty (shape {values.shape}); a fit needs at least one example")
    values = values.astype(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        kind = "NaN" if np.isnan(values).any() else "infinite values"
        raise ValueError(
            f"{what} contains {kind} ({int(bad.sum())} entries, first in row {row}); "
            "drop or impute those rows before fitting"
        )
    model_dtype = torch.get_default_dtype()  # what the model computes in, whatever dtype the tensor keeps
    if np.abs(values).max() > torch.finfo(model_dtype).max:
        raise ValueError(f"{what} has values too large for {model_dtype}; rescale the data first")
    return torch.as_tensor(values, dtype=dtype or model_dtype)


def check_inputs_targets(x, y) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a pair of inputs ``x`` of shape ``(n, d)`` and targets ``y`` of shape ``(n,)`` or ``(n, k)``.

    ``y`` stays in float64 so that a likelihood's label check sees the values as given
    (a label of 1e-200 is not silently rounded to 0); the likelihood casts it.
    """
    x = as_float_tensor(x, "inputs x")
    y = as_float_tensor(y, "targets y", torch.float64)
    if x.dim() != 2:
        raise ValueError(f"inputs x must be 2-D of shape (n, features), got shape {tuple(x.shape)}; "
                         "use x.reshape(-1, 1) for a single feature")
    if y.dim() not in (1, 2):
        raise ValueError(f"targets y must have shape (n,) or (n, outputs), got {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"inputs and targets differ in length: x has {x.shape[0]} rows, y has {y.shape[0]}")
    return x, y
