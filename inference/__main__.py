"""``python -m inference``: see :mod:`inference.cli`."""

import sys

from inference.cli import main

sys.exit(main())
