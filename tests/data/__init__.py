"""Tests of the data-preparation scripts (tools/data)."""
