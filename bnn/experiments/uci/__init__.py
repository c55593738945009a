"""The UCI regression benchmark on its standard splits: a resumable grid, locally or on a Ray cluster, and its table."""

from bnn.experiments.uci.grid import Cell, parse_splits
from bnn.experiments.uci.protocol import run_cell
from bnn.experiments.uci.published import PUBLISHED
from bnn.experiments.uci.run import run_uci

__all__ = ["PUBLISHED", "Cell", "parse_splits", "run_cell", "run_uci"]
