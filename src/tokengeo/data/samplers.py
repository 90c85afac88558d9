"""Seeded batch samplers with exact resume (``state_dict`` / ``load_state_dict``).

Both are infinite iterators of index tensors. ``batch_size`` is the *global* batch: with
``world_size`` data-parallel ranks, rank ``r`` gets rows ``[r*B/W, (r+1)*B/W)`` of the
batch a single process would draw, so a W-process run sees the same examples as a
1-process run with the same seed and global batch.
"""

from __future__ import annotations

from typing import Any

import torch

from tokengeo.checks import check_positive
from tokengeo.errors import CheckpointError, ConfigError

_MIX = 1_000_003  # seed mixing: batch/epoch k of seed s uses generator seed s * _MIX + k


def _generator(seed: int, k: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * _MIX + k) % (2**63))


def _check_world(batch_size: int, rank: int, world_size: int) -> None:
    check_positive("batch_size", batch_size)
    check_positive("world_size", world_size)
    if not 0 <= rank < world_size:
        raise ConfigError(f"rank={rank} must lie in [0, world_size={world_size})")
    if batch_size % world_size:
        raise ConfigError(f"batch_size={batch_size} must be divisible by world_size={world_size}")


class _Resumable:
    _identity: tuple[str, ...]  # attributes a saved state must agree on
    _progress: tuple[str, ...]  # attributes the state restores

    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._identity + self._progress}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in self._identity:
            if state.get(key) != getattr(self, key):
                raise CheckpointError(
                    f"sampler state has {key}={state.get(key)!r} but this sampler has "
                    f"{key}={getattr(self, key)!r}; resume with the same data and settings"
                )
        for key in self._progress:
            setattr(self, key, int(state[key]))

    def __iter__(self):
        return self


class RandomWindowSampler(_Resumable):
    """Step ``k`` draws ``batch_size`` window starts uniformly from ``[0, num_windows)``
    with a generator seeded by ``(seed, k)``: the state is just ``step``."""

    _identity = ("num_windows", "batch_size", "seed")
    _progress = ("step",)

    def __init__(
        self, num_windows: int, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1
    ):
        check_positive("num_windows", num_windows)
        _check_world(batch_size, rank, world_size)
        self.num_windows, self.batch_size, self.seed = num_windows, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.step = 0

    def state_after(self, steps: int) -> dict[str, Any]:
        """The state after ``steps`` batches from the start (checks a saved state)."""
        return {**self.state_dict(), "step": steps}

    def __next__(self) -> torch.Tensor:
        gen = _generator(self.seed, self.step)
        starts = torch.randint(self.num_windows, (self.batch_size,), generator=gen)  # (B,)
        self.step += 1
        per_rank = self.batch_size // self.world_size
        return starts[self.rank * per_rank : (self.rank + 1) * per_rank]  # (B/W,)


class EpochBatchSampler(_Resumable):
    """Epoch ``e`` visits a permutation of ``range(num_examples)`` seeded by ``(seed, e)``
    (the identity when ``shuffle=False``) in batches; the last partial batch is dropped
    when ``drop_last``. The state is ``(epoch, position)``."""

    _identity = ("num_examples", "batch_size", "seed", "shuffle", "drop_last")
    _progress = ("epoch", "position")

    def __init__(
        self,
        num_examples: int,
        batch_size: int,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = True,
        rank: int = 0,
        world_size: int = 1,
    ):
        _check_world(batch_size, rank, world_size)
        if num_examples < (batch_size if drop_last else 1):
            raise ConfigError(f"num_examples={num_examples} is smaller than one batch")
        self.num_examples, self.batch_size, self.seed = num_examples, batch_size, seed
        self.shuffle, self.drop_last = shuffle, drop_last
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.position = 0  # index into this epoch's order of the next batch's first example
        self._cache: tuple[int, torch.Tensor] = (-1, torch.empty(0, dtype=torch.long))

    def state_after(self, steps: int) -> dict[str, Any]:
        """The state after ``steps`` batches from the start (checks a saved state): batch
        ``s`` (0-based) is batch ``s mod n`` of epoch ``s div n``, n batches per epoch."""
        if steps == 0:
            return {**self.state_dict(), "epoch": 0, "position": 0}
        full, part = divmod(self.num_examples, self.batch_size)
        per_epoch = full + (1 if part and not self.drop_last else 0)
        epoch, k = divmod(steps - 1, per_epoch)
        position = min((k + 1) * self.batch_size, self.num_examples)
        return {**self.state_dict(), "epoch": epoch, "position": position}

    def _order(self) -> torch.Tensor:
        if self._cache[0] != self.epoch:
            n = self.num_examples
            gen = _generator(self.seed, self.epoch)
            order = torch.randperm(n, generator=gen) if self.shuffle else torch.arange(n)
            self._cache = (self.epoch, order)
        return self._cache[1]  # (N,)

    def __next__(self) -> torch.Tensor:
        left = self.num_examples - self.position
        if left == 0 or (self.drop_last and left < self.batch_size):
            self.epoch, self.position = self.epoch + 1, 0
        batch = self._order()[self.position : self.position + self.batch_size]  # (<=B,)
        self.position += len(batch)
        return torch.tensor_split(batch, self.world_size)[self.rank]
