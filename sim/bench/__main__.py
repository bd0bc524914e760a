"""``python -m sim.bench`` (``make bench``)."""

import sys

from sim.bench.suite import main

sys.exit(main())
