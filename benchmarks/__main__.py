"""``python -m benchmarks``: the ``mara-bench`` command (:func:`benchmarks.cli.main`), e.g.
``python -m benchmarks default --seeds 3``."""

import sys

from benchmarks.cli import main

sys.exit(main())
