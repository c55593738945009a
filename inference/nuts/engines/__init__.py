"""The NUTS engines: each runs one chain of a :class:`~bnn.inference.nuts.fit.ChainJob` and returns its draws."""
