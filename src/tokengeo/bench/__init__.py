"""Benchmarks of the performance claims, as library code (``benchmarks/*.py`` call these).

Each measures ratios against a baseline timed in the same process, interleaving the
contenders so drifts in machine load hit all of them alike.
"""
