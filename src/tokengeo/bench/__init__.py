"""Benchmarks of the performance claims: all of their code lives here.

One module per claim (``laplacian``, ``ltransformer``, ``flows``, ``similarity``,
``trainer``), each a config dataclass and ``run(cfg) -> dict``; timing and peak memory
come from :mod:`tokengeo.bench.measure` only. ``benchmarks/*.py`` are thin entry points
(parse flags with :mod:`tokengeo.bench.cli`, print the JSON) and ``tokengeo bench NAME``
runs the same code from the CLI.

Each measures ratios against a baseline timed in the same process, interleaving the
contenders so drifts in machine load hit all of them alike.
"""
