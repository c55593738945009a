"""``python -m bnn``: the ``bnn`` command (:mod:`bnn.console`)."""

import sys

from bnn.console import main

sys.exit(main())
