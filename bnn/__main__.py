"""``python -m bnn``: the command line of :mod:`bnn.inference.cli`."""

import sys

from bnn.inference.cli import main

sys.exit(main())
