"""Bayesian neural networks as Pyro programs, fitted by SVI, NUTS and Laplace and compared with ArviZ.

The one import name of the collection. Its subpackages, from the bottom layer up (a package imports only
the layers below it; ``lint-imports`` checks this):

- :mod:`bnn.registry`, :mod:`bnn.options`: name registries and the option parsers every layer shares;
- :mod:`bnn.datasets`, :mod:`bnn.models`: data; networks, priors and likelihoods as Pyro programs;
- :mod:`bnn.guides`: variational posteriors;
- :mod:`bnn.inference`: ``fit(model, data, method=...) -> Posterior``, one subpackage per method, then
  :mod:`bnn.inference.evaluation` (metrics, comparison, report, plots) and :mod:`bnn.cli.main`.
"""

__version__ = "0.2.0"
