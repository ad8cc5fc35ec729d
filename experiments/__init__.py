"""Experiments behind the shipped MARA: checkpoints, variants and scripts (not installed)."""
