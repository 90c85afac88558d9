"""Benchmarks of the performance claims: all of their code lives here.

One module per claim, each a config dataclass and ``run(cfg) -> dict``, named in
:data:`tokengeo.bench.registry.BENCHMARKS`, which also gives every result one JSON shape;
timing and peak memory come from :mod:`tokengeo.bench.measure` only (wall-clock and
CUDA-event timers). ``benchmarks/NAME.py`` are thin entry points (one flag per config
field) and ``tokengeo bench NAME|all`` runs the same code from the CLI.

Each measures ratios against a baseline timed in the same process, interleaving the
contenders so drifts in machine load hit all of them alike.
"""
