"""Learning-rate schedule: linear warmup, then cosine decay (Loshchilov & Hutter, SGDR).

The schedule is a pure function of the step, so its whole state is the step counter: a
resumed run recomputes exactly the rates of an uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from tokengeo.errors import CheckpointError


@dataclass(frozen=True)
class WarmupCosine:
    """``lr(s)`` for the update that follows ``s`` completed steps (s = 0, ..., steps-1):

    - warmup: ``lr * (s + 1) / warmup`` for ``s < warmup``;
    - decay:  ``min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2`` with
      ``p = (s - warmup) / max(1, steps - warmup)``, so the last update uses a rate just
      above ``min_lr``.
    """

    lr: float
    min_lr: float
    warmup: int
    steps: int

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.steps - self.warmup))
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every parameter group's rate for the update after ``step`` steps."""
        lr = self(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self) -> dict:
        return asdict(self)

    def check_state(self, state: dict) -> None:
        """Refuse a checkpoint whose schedule differs: its rates would not continue ours."""
        if state != self.state_dict():
            raise CheckpointError(
                f"checkpoint schedule {state} differs from this run's {self.state_dict()}; "
                "resume with the same lr, min_lr, warmup and steps"
            )
