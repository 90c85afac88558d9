"""Causal-LM windows over a token stream: window ``s`` is ``x = t[s:s+T]``, ``y = t[s+1:s+T+1]``."""

from __future__ import annotations

import torch

from tokengeo.checks import check_positive
from tokengeo.errors import ConfigError


class TokenWindows:
    """All ``len(tokens) - block_size`` windows of a 1-D token stream, indexed by start."""

    def __init__(self, tokens: torch.Tensor, block_size: int):
        check_positive("block_size", block_size)
        if tokens.ndim != 1:
            raise ConfigError(f"tokens must be 1-D, got shape {tuple(tokens.shape)}")
        if tokens.shape[0] <= block_size:
            raise ConfigError(
                f"block_size={block_size} needs more than {block_size} tokens; "
                f"the stream has {tokens.shape[0]}"
            )
        self.tokens = tokens  # (N,)
        self.block_size = block_size

    def __len__(self) -> int:
        return self.tokens.shape[0] - self.block_size

    def __getitem__(self, starts) -> tuple[torch.Tensor, torch.Tensor]:
        """Int start -> x, y (T,); index tensor (B,) -> x, y (B, T), int64."""
        starts = torch.as_tensor(starts, dtype=torch.long)
        if starts.numel() and (starts.min() < 0 or starts.max() >= len(self)):
            raise IndexError(f"window starts must lie in [0, {len(self)})")
        offsets = torch.arange(self.block_size + 1)  # (T+1,)
        chunk = self.tokens[starts.unsqueeze(-1) + offsets].long()  # (..., T+1)
        return chunk[..., :-1], chunk[..., 1:]

    def eval_starts(self, max_windows: int | None = None) -> torch.Tensor:
        """Starts of non-overlapping windows covering the stream (evenly thinned to at most
        ``max_windows``): the fixed, seed-free evaluation set."""
        starts = torch.arange(0, len(self), self.block_size)  # (W,)
        if max_windows is not None and max_windows < len(starts):
            check_positive("max_windows", max_windows)
            pick = torch.linspace(0, len(starts) - 1, max_windows).round().long()
            starts = starts[pick]
        return starts
