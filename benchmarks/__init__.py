"""The ``mara-bench`` benchmark suites (SPEC §7): ``run_suite`` is the Python API of the
scheduling suites; ``python -m benchmarks --help`` lists every suite."""

from benchmarks.suites import SUITES, run_suite

__all__ = ["SUITES", "run_suite"]
