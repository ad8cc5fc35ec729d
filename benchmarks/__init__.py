"""The ``mara-bench`` benchmark suites (SPEC §7): ``run_suite`` is the Python API of the
scheduling suites; ``python -m benchmarks --help`` lists every suite (:mod:`benchmarks.cli`)::

    from benchmarks import run_suite
    print(run_suite("default", Path("results/mine"), policies=["lara", "edf"], seeds=3))
"""

from benchmarks.suites import SUITES, run_suite

__all__ = ["SUITES", "run_suite"]
