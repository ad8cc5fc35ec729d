"""Data-preparation scripts (curve banks) of the benchmarks."""
