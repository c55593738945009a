"""The UCI regression benchmark on its standard splits: a resumable grid, locally or on a Ray cluster, and its table."""

from bnn.inference.uci.grid import Cell, parse_splits
from bnn.inference.uci.protocol import run_cell
from bnn.inference.uci.published import PUBLISHED
from bnn.inference.uci.run import run_uci

__all__ = ["PUBLISHED", "Cell", "parse_splits", "run_cell", "run_uci"]
