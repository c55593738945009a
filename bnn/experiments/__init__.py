"""The applications built on the library: the comparison of methods with its report
(:mod:`bnn.experiments.comparison`), the UCI benchmark grid (:mod:`bnn.experiments.uci`) and the continual-learning
benchmark (:mod:`bnn.experiments.continual`). The command line only parses arguments and calls them."""

from bnn.experiments.comparison import run_comparison

__all__ = ["run_comparison"]
