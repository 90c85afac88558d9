"""Where ``reproduce`` cells run: the device kind, precision and GPUs of every cell.

``--device auto|cpu|cuda`` (auto: CUDA where this machine has a GPU) chooses the kind for
every cell that can use a GPU (``Cell.on_device``: the training cells and the
L-Transformer's efficiency cell); the other cells (flow simulations, similarity of
pretrained models) run on the CPU whatever the flag. On CUDA a training cell trains with the
precision its TOML's ``train`` table gives (``auto``: bf16 autocast) and through
``torch.compile`` when it sets ``compile = true``; on the CPU it trains in fp32 uncompiled,
whatever the table says, so that a ``[gpu]`` table can be run (and tested) on a CPU.

A placed cell records its kind and precision in its ``placement`` tag (``cuda-bf16``; a
DDP cell adds its GPU count, ``cuda-bf16-x2``), which is part of its cache key and file name
and of its run folder: CPU and GPU cells never share a cached result or a checkpoint. CPU
cells carry no tag, so their keys are those of every earlier CPU run.

GPUs per cell: a suite whose settings ask ``gpus = N`` trains each of its cells under
``torchrun`` on N GPUs of one node (DDP; on the CPU: N gloo processes). Local workers share
the visible GPUs round-robin (``CUDA_VISIBLE_DEVICES`` per worker, several cells per GPU);
on Ray each cell asks for its share (``--gpus-per-cell``, else its suite's ``gpus_per_cell``
setting, else 1; 1/n packs n cells on a GPU), or N whole GPUs for a DDP cell.

Every device setting is checked by :func:`check_devices` before any cell runs and before
``--out`` is touched; a bad one is refused with one line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tokengeo import devices
from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell

GPU_PRECISIONS = ("bf16", "fp16", "fp32")  # what a CUDA cell may train in ("auto": bf16)


def visible_gpus() -> list[str]:
    """This process's CUDA devices as ``CUDA_VISIBLE_DEVICES`` names them (indices or
    UUIDs), or ``0 … n-1`` when the variable is unset; empty without CUDA."""
    n = devices.visible_count()
    if n == 0:
        return []
    named = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
             if d.strip()]
    return named[:n] if len(named) >= n else [str(i) for i in range(n)]


def check_share(share: float) -> float:
    """``--gpus-per-cell``: 1, or 1/n for n cells packed on one GPU (0.5, 0.25, ...)."""
    ok = isinstance(share, int | float) and not isinstance(share, bool) and math.isfinite(share)
    if ok and 0 < share <= 1:
        n = round(1 / share)
        if abs(n * share - 1) < 1e-3:
            return float(share)
    raise ConfigError(f"--gpus-per-cell {share!r} must be 1 or a fraction 1/n that packs n "
                      "cells on one GPU (0.5, 0.25, 0.2, ...); a DDP cell asks for whole GPUs "
                      "with `gpus = N` in its suite's TOML")


@dataclass(frozen=True)
class DeviceConfig:
    """``--device`` and ``--gpus-per-cell`` (None: 1 under CUDA)."""

    device: str = "auto"
    gpus_per_cell: float | None = None

    def validate(self) -> DeviceConfig:
        devices.check(self.device)
        if self.gpus_per_cell is not None:
            check_share(self.gpus_per_cell)
        return self

    def kind(self, gpus: int, lenient: bool = False) -> str:
        """``cpu`` or ``cuda`` for a node with ``gpus`` GPUs; CUDA without one is refused
        unless ``lenient`` (a dry run, or a Ray cluster whose GPUs are checked on connect)."""
        self.validate()
        return devices.kind(self.device, gpus, lenient=lenient)


def cell_gpus(cell: Cell) -> int:
    """Processes (GPUs under CUDA) of a cell's training: its ``processes`` argument."""
    return int(cell.kwargs.get("processes", 1) or 1)


def gpu_precision(config: dict) -> str:
    """The precision a training config trains in on CUDA (``auto``: bf16)."""
    p = config.get("precision", "auto")
    return "bf16" if p == "auto" else p


def place(cell: Cell, kind: str) -> Cell:
    """``cell`` on device ``kind``: its config's device, precision and compile set, its run
    folder and cache key tagged (see the module docstring); a cell that cannot use a GPU,
    or a CPU cell of a table that asks nothing of a GPU, is returned as it is."""
    if not cell.on_device or not isinstance(cell.kwargs.get("config"), dict):
        return cell
    config = dict(cell.kwargs["config"])
    trains, n = "run_dir" in cell.kwargs, cell_gpus(cell)
    if kind == "cuda":
        config["device"] = "cuda"
        tag = "cuda"
        if trains:
            config["precision"] = gpu_precision(config)
            tag = f"cuda-{config['precision']}"
    else:
        asks_gpu = config.get("precision", "auto") in ("bf16", "fp16") or config.get("compile")
        if trains and asks_gpu:
            config.update(precision="fp32", compile=False)  # fp32, uncompiled on a CPU
        if config.get("device", "cpu") != "cpu":  # a table's own device yields to --device
            config["device"] = "cpu"
        tag = "cpu"
    tag += f"-x{n}" if trains and n > 1 else ""
    if tag == "cpu":  # a CPU cell keeps the key of every earlier CPU run
        return replace(cell, kwargs={**cell.kwargs, "config": config})
    kwargs = {**cell.kwargs, "config": config}
    if trains:
        kwargs["run_dir"] = f"{kwargs['run_dir']}-{tag}"
    return replace(cell, kwargs=kwargs, placement=tag)


def place_all(cells: Sequence[Cell], kind: str, share: float | None = None) -> list[Cell]:
    """Every cell placed on ``kind``; ``share``: what the CUDA ones ask Ray for (the suite's
    ``gpus_per_cell``; None: ``--gpus-per-cell`` or 1)."""
    placed = [place(c, kind) for c in cells]
    if share is None:
        return placed
    return [replace(c, gpu_share=share) if c.placement.startswith("cuda") else c
            for c in placed]


def check_gpu_share(cfg: DeviceConfig, kind: str, executor) -> None:
    """The ``--gpus-per-cell`` refusals, the same for a run and its ``--dry-run`` (``kind``:
    where the cells are placed): not 1 or 1/n, without ``--executor ray``, or with the cells
    on the CPU."""
    if cfg.gpus_per_cell is None:
        return
    check_share(cfg.gpus_per_cell)
    if executor.executor != "ray":
        raise ConfigError("--gpus-per-cell needs --executor ray (local workers share the "
                          "visible GPUs round-robin)")
    if kind != "cuda":
        raise ConfigError(f"--gpus-per-cell {cfg.gpus_per_cell:g} needs cells on CUDA; "
                          "they run on the CPU here (--device cpu, or auto without a GPU)")


def check_devices(cfg: DeviceConfig, kind: str, cells: Sequence[Cell], executor,
                  gpus: int) -> None:
    """Refuse device settings no cell could run with: GPU shares outside Ray or off CUDA,
    bad fractions, and cells asking for more GPUs than this node has (a Ray cluster given
    by address is checked when it connects: :func:`check_cluster_gpus`)."""
    check_gpu_share(cfg, kind, executor)
    if kind != "cuda" or getattr(executor, "ray_address", None):
        return
    need = max((cell_gpus(c) for c in cells if c.on_device), default=1)
    if need > gpus:
        suite = next(c.suite for c in cells if c.on_device and cell_gpus(c) == need)
        raise ConfigError(f"suite {suite!r} asks gpus = {need} per cell but this node has "
                          f"{gpus} GPU(s); lower `gpus` in its TOML (--config-dir) or run on a "
                          "node with more")


def check_cluster_gpus(cells: Sequence[Cell], per_node: Sequence[float]) -> None:
    """Refuse, before any cell is submitted, cells that no node of a Ray cluster can hold
    (``per_node``: each alive node's GPUs)."""
    most = max(per_node, default=0.0)
    need = max((cell_gpus(c) for c in cells if c.placement.startswith("cuda")), default=0)
    if need and need > most:
        raise ConfigError(f"cells on CUDA ask for {need} GPU(s) of one node but the largest "
                          f"node of the Ray cluster has {most:g}; use --device cpu, or lower "
                          "`gpus` in the suite's TOML")


def where_ran(cells: Sequence[Cell], values: Sequence[dict | None]) -> str:
    """One sentence for a suite's report: its cells by device, with the GPU names the
    cells recorded."""
    counts: dict[str, int] = {}
    for c in cells:
        tag = c.placement or "cpu"
        counts[tag] = counts.get(tag, 0) + 1
    names = sorted({v["device_name"] for v in values
                    if isinstance(v, dict) and isinstance(v.get("device_name"), str)})
    gpu = f" ({', '.join(names)})" if names else ""
    parts = [f"{n} on {_words(tag)}" + (gpu if tag.startswith("cuda") else "")
             for tag, n in sorted(counts.items())]
    return f"Where the cells ran: {'; '.join(parts)}." if parts else ""


def _words(tag: str) -> str:
    kind, *rest = tag.split("-")
    bits = [r for r in rest if not r.startswith("x")]
    ddp = [r[1:] for r in rest if r.startswith("x")]
    out = ("CUDA" if kind == "cuda" else "the CPU") + (f" in {bits[0]}" if bits else "")
    unit = "GPUs" if kind == "cuda" else "processes"
    return out + (f", DDP over {ddp[0]} {unit} each" if ddp else "")
