"""Tests of the benchmarks' data-preparation scripts."""
