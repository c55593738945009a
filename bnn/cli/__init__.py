"""The ``bnn`` command: one module per subcommand (``fit``, ``compare``, ``continual``, ``uci``), on top of every
other layer."""
