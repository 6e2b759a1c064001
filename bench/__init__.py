"""Benchmarks of kai on synthetic clusters built from fixed seeds (see docs/benchmarks.md)."""
