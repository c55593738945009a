"""Figures saved as PNG and closed, so that they never change the user's matplotlib backend nor show up twice in a
notebook (on a machine without a display matplotlib picks Agg by itself)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt


def save_figure(figure, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` as PNG, close it, and return the path."""
    path = Path(path)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
