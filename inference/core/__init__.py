"""What every inference method shares: the :class:`~bnn.inference.core.method.Method` it registers, the
:class:`~bnn.inference.core.posterior.Posterior` it returns, the prediction types, the fit record, and the copy of
the model a fit works on."""
