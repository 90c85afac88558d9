"""Every benchmark in one style, and one JSON shape around each.

A benchmark is a module of :mod:`tokengeo.bench` with a config dataclass and
``run(cfg) -> dict`` (its figures; its ``targets``, if it has any, among them). This table
names them; :func:`run` runs one and wraps its figures in the one shape every benchmark's
JSON has::

    {"benchmark", "versions", "device", "threads", "load_at_start", "config", "figures",
     "targets"}

``tokengeo bench NAME|all`` and ``benchmarks/NAME.py`` (:func:`script`) both go through it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokengeo.errors import ConfigError

# keys a module's own dict may carry that the shape holds at its top (or not at all)
HEADER_KEYS = ("benchmark", "torch", "threads", "config", "device")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``module`` under tokengeo.bench holds ``config`` (a dataclass) and
    ``run``; ``quick``: the config fields ``--quick`` sets (fewer repeats); ``precise_rss``:
    it measures peak resident memory, which needs glibc's mmap threshold fixed before the
    process starts
    (:func:`~tokengeo.bench.measure.ensure_precise_rss`)."""

    name: str
    module: str
    config: str
    claim: str
    quick: tuple[tuple[str, Any], ...] = ()
    precise_rss: bool = False

    def config_class(self) -> type:
        return getattr(importlib.import_module(f"tokengeo.bench.{self.module}"), self.config)

    def runner(self) -> Callable[[Any], dict]:
        return importlib.import_module(f"tokengeo.bench.{self.module}").run

    def make_config(self, *, quick: bool = False, device: str | None = None, **fields):
        """The config: defaults, then ``quick``'s fields, ``device`` (where the config has
        one) and ``fields``."""
        cls = self.config_class()
        names = {f.name for f in dataclasses.fields(cls)}
        values = dict(self.quick) if quick else {}
        if device is not None and "device" in names:
            values["device"] = device
        return cls(**{**values, **fields})


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    Benchmark("laplacian", "laplacian", "LaplacianBenchConfig",
              "Laplacian heads: operator, train-step and peak-memory ratios to standard "
              "attention (on CUDA also every kernel of the table, per dtype)",
              quick=(("op_repeats", 5), ("train_repeats", 5)), precise_rss=True),
    Benchmark("laplacian_host", "laplacian_host", "HostBenchConfig",
              "the host's cost per call of each Laplacian kernel (what short GPU "
              "sequences pay)", quick=(("repeats", 3), ("calls", 100)), precise_rss=True),
    Benchmark("laplacian_hf", "laplacian_hf", "HFBenchConfig",
              "a laplacianized Hugging Face LM: forward and generate tokens/s",
              quick=(("repeats", 3),)),
    Benchmark("ltransformer", "ltransformer", "LTransformerBenchConfig",
              "the L-Transformer's step time, memory and parameters against the encoder",
              quick=(("repeats", 3),), precise_rss=True),
    Benchmark("flows", "flows", "FlowsBenchConfig",
              "the chunked flow simulator against a materialising reference",
              quick=(("repeats", 1),)),
    Benchmark("similarity", "similarity", "SimilarityBenchConfig",
              "head-output similarity analysis against the plain forward pass",
              quick=(("repeats", 1), ("batches", 2))),
    Benchmark("trainer", "trainer", "TrainerBenchConfig",
              "the trainer's overhead as a fraction of step time", quick=(("repeats", 1),)),
)}


def benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; one ConfigError listing the names otherwise."""
    if name not in BENCHMARKS:
        raise ConfigError(f"no benchmark {name!r}; choose one of {[*BENCHMARKS, 'all']}")
    return BENCHMARKS[name]


def versions() -> dict:
    """Versions of what the figures depend on (None for what is not installed)."""
    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__,
             "tokengeo": getattr(sys.modules.get("tokengeo"), "__version__", None),
             "cuda": torch.version.cuda}
    for name in ("triton", "transformers"):
        module = sys.modules.get(name)
        found[name] = getattr(module, "__version__", None) if module else None
    return found


def device_name(device: str) -> str:
    """The machine the figures come from: the GPU's name, or the CPU's."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def header(name: str, device: str = "cpu") -> dict:
    """The top of every benchmark's JSON, taken when it starts."""
    import torch

    return {"benchmark": name, "versions": versions(), "device": device_name(device),
            "threads": torch.get_num_threads(), "load_at_start": list(os.getloadavg())}


def report(head: dict, config: Any, figures: dict) -> dict:
    """The one shape: ``head``, the config, the figures, the targets (the module's own
    header keys are dropped: the shape holds them once)."""
    figures = {k: v for k, v in figures.items() if k not in HEADER_KEYS}
    targets = figures.pop("targets", {})
    config = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    head = {**head, "versions": {**head["versions"], **versions()}}  # what it imported
    return {**head, "config": config, "figures": figures, "targets": targets}


def run(name: str, config: Any = None) -> dict:
    """Run benchmark ``name`` with ``config`` (its defaults if None); its JSON."""
    bench = benchmark(name)
    config = bench.make_config() if config is None else config
    head = header(name, getattr(config, "device", "cpu"))
    return report(head, config, bench.runner()(config))


def script(name: str, argv: Sequence[str] | None = None) -> int:
    """``benchmarks/NAME.py``: one ``--flag`` per config field, prints the JSON."""
    from tokengeo.bench.cli import parse_config
    from tokengeo.bench.measure import ensure_precise_rss

    bench = benchmark(name)
    if bench.precise_rss:
        ensure_precise_rss()  # re-executes this process once, with the same arguments
    try:
        config = parse_config(bench.config_class(), bench.claim, argv)
        print(json.dumps(run(name, config), indent=1, allow_nan=True))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
