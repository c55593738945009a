"""Benchmarks of the collection, runnable as ``python -m benchmarks.<name>``; results in ``benchmarks/results``."""
