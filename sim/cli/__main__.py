"""``python -m sim.cli``: the ``lpu`` command."""

import sys

from sim.cli.main import main

sys.exit(main())
