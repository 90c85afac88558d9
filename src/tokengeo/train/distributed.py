"""Data parallelism with PyTorch DDP, configured from the variables ``torchrun`` sets.

``torchrun --nproc_per_node N -m tokengeo train ...`` starts N processes with ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in their environment;
:func:`init_distributed` joins them into one process group (NCCL on GPUs, gloo on CPU).
Without those variables it returns a single-process :class:`DistEnv` and nothing else
changes. Only rank 0 logs and writes files; every rank holds the same weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from tokengeo.errors import ConfigError


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(preference: str, local_rank: int = 0) -> torch.device:
    """The device of ``preference`` (``auto``, ``cpu`` or ``cuda``) for ``local_rank``
    (:func:`tokengeo.devices.torch_device`)."""
    from tokengeo.devices import torch_device

    return torch_device(preference, local_rank)


CONNECT_TIMEOUT = 30.0  # seconds to reach the rendezvous (MASTER_ADDR:MASTER_PORT)


def init_distributed(device: str = "auto", connect_timeout: float | None = None) -> DistEnv:
    """Join the process group described by torchrun's environment (or run alone).

    The rendezvous gives up after ``connect_timeout`` seconds (default 30) with one line
    (a wrong ``MASTER_ADDR`` no longer waits for torch's default 10 minutes)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistEnv(device=resolve_device(device))
    needed = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    missing = [v for v in needed if v not in os.environ]
    if missing:
        raise ConfigError(f"WORLD_SIZE={world_size} but {missing} are unset; launch with torchrun")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    dev = resolve_device(device, local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    timeout = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if not number or not 0 < timeout <= 86400:
        raise ConfigError(f"--connect-timeout {timeout!r} must be a number of seconds in "
                          "(0, 86400]")
    if not dist.is_initialized():
        from datetime import timedelta

        try:
            with _native_stderr_held():  # c10d's C++ retries print frames straight to fd 2
                dist.init_process_group("nccl" if dev.type == "cuda" else "gloo",
                                        timeout=timedelta(seconds=timeout))
        except (RuntimeError, OSError) as exc:  # DistStoreError (a RuntimeError), refused
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"could not join the process group at {os.environ['MASTER_ADDR']}"
                              f":{os.environ['MASTER_PORT']} within {timeout:g} s ({first}); "
                              "check torchrun's --master-addr/--master-port, or raise "
                              "--connect-timeout") from None
    return DistEnv(rank, world_size, local_rank, dev)


@contextlib.contextmanager
def _native_stderr_held():
    """Hold what native code writes to file descriptor 2 while the block runs: given back
    on success, dropped when the block raises (the caller then says one line; c10d's retry
    log and C++ frames, 38 to 85 lines a rank, would bury it)."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        held.seek(0)
        text = held.read()
    if text:
        sys.stderr.write(text.decode("utf-8", "replace"))
        sys.stderr.flush()


def shutdown(env: DistEnv) -> None:
    if env.enabled and dist.is_initialized():
        dist.destroy_process_group()


def wrap_model(model: nn.Module, env: DistEnv) -> nn.Module:
    """DDP wrapper (it broadcasts rank 0's weights, then averages gradients) or the model."""
    if not env.enabled:
        return model
    ids = [env.device.index] if env.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def all_reduce_sum(tensor: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """Sum ``tensor`` over ranks in place (identity for one process)."""
    if env.enabled:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier(env: DistEnv) -> None:
    if env.enabled:
        dist.barrier()


def all_gather_json(obj: Any, env: DistEnv) -> list[Any]:
    """Every rank's JSON-able ``obj``, in rank order (sent as UTF-8 bytes, not pickles)."""
    if not env.enabled:
        return [obj]
    data = torch.tensor(list(json.dumps(obj).encode()), dtype=torch.uint8, device=env.device)
    size = torch.tensor([data.numel()], device=env.device)
    sizes = [torch.zeros_like(size) for _ in range(env.world_size)]
    dist.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=env.device)
    padded[: data.numel()] = data
    gathered = [torch.empty_like(padded) for _ in range(env.world_size)]
    dist.all_gather(gathered, padded)
    from tokengeo.io import parse_json

    # bounded like every JSON tokengeo reads (depth, size); NaN stays a result (a diverged
    # rank's loss), as in the metrics files
    return [parse_json(bytes(g[: int(s.item())].tolist()), f"rank {rank}'s JSON",
                       limit=max(longest, 1), allow_nan=True)
            for rank, (g, s) in enumerate(zip(gathered, sizes, strict=True))]
