"""P V written into z's own buffer and z restored bit for bit (the CPU backward's trick).

The Laplacian kernel saves z = a V + b P V instead of SDPA's output P V; its backward needs
P V, head-wise ``z`` (attention heads), ``V − z`` (Laplacian heads) or the saved copy
(mixed heads). On the CPU, :func:`with_pv_in_z` writes P V into z's own buffer in small
blocks, runs the kernel, and restores z exactly: the rare elements where
V − (V − z) ≠ z in floating point are kept aside and written back, so no second full
tensor ever exists. The round-trip test runs in two reused scratch blocks that stay in
cache, so the extra memory traffic is one pass over z and V to write P V and one to
restore z. It reads one value back to the host per block, which a GPU cannot afford: on
CUDA the kernel writes P V into a separate buffer in one pass instead
(:mod:`tokengeo.nn.kernels.in_place`).
"""

from __future__ import annotations

import torch

from tokengeo.nn.heads import LAPLACIAN, MIXED, HeadRuns

# Elements of each of the two scratch blocks (512 KiB in float32: they stay in cache, so
# the transforms of z cost one pass over z and V).
SCRATCH_CHUNK = 1 << 17


def _blocks(z: torch.Tensor, h0: int, h1: int) -> list[tuple[slice, slice]]:
    """(batch, token) ranges of z[:, :, h0:h1] (B, T, h, Dh), ≤ SCRATCH_CHUNK elements each.

    Whole sequences when one fits, else token ranges of one sequence (≥ one token).
    """
    B, T = z.shape[:2]
    tokens = max(1, SCRATCH_CHUNK // max((h1 - h0) * z.shape[3], 1))
    if tokens >= T:
        step = tokens // T
        return [(slice(i, i + step), slice(None)) for i in range(0, B, step)]
    return [(slice(i, i + 1), slice(t, t + tokens)) for i in range(B) for t in range(0, T, tokens)]


def _pv_into_z(z, v, pv_mixed, runs: HeadRuns) -> list:
    """Overwrite z (B, T, H, Dh) with P V head-wise, reversibly; return the exact fixes.

    Laplacian heads: z ← V − z, block by block through two cache-sized scratch blocks
    (s1 = V − z, s2 = V − s1, z ← s1), so z and V are read and z written once from memory.
    Since V − (V − z) ≠ z in rare roundings, the elements where s2 ≠ z keep their
    original value in the returned fixes. The test is Σ|s2 − z| ≠ 0 (a sum of
    non-negative terms is 0 only if all are; NaN propagates): a float sum is several
    times cheaper than ``torch.equal`` on CPU. Mixed heads: z and the saved P V swap.
    """
    fixes: list = []
    scratch = _Scratch(z)
    for h0, h1, kind in runs.runs:
        if kind == MIXED:
            _swap_mixed(z, pv_mixed, runs, h0, h1, scratch)
        elif kind == LAPLACIAN:
            for bs, ts in _blocks(z, h0, h1):
                x, vv = z[bs, ts, h0:h1], v[bs, ts, h0:h1]  # (B', T', h, Dh)
                s1, s2 = scratch.pair(x)
                torch.sub(vv, x, out=s1)
                torch.sub(vv, s1, out=s2).sub_(x)  # (V − (V − z)) − z: 0 where exact
                if s2.abs_().sum().item() != 0:  # rare (or NaN): keep the changed elements
                    bad = s2.ne_(0).nonzero(as_tuple=True)
                    fixes.append((bs, ts, h0, h1, bad, x[bad].clone()))
                x.copy_(s1)
    return fixes


def _z_from_pv(z, v, pv_mixed, runs: HeadRuns, fixes: list) -> None:
    """Undo :func:`_pv_into_z` exactly: z ← V − z, the fixes, and the swaps again."""
    scratch = _Scratch(z)
    for h0, h1, kind in runs.runs:
        if kind == MIXED:
            _swap_mixed(z, pv_mixed, runs, h0, h1, scratch)
        elif kind == LAPLACIAN:
            zr = z[:, :, h0:h1]  # (B, T, h, Dh)
            torch.sub(v[:, :, h0:h1], zr, out=zr)
    for bs, ts, h0, h1, idx, vals in fixes:
        z[bs, ts, h0:h1][idx] = vals


class _Scratch:
    """Two scratch blocks shaped like a block ``x`` of :func:`_blocks`, reused across blocks
    (one allocation of the largest block's size, ≤ SCRATCH_CHUNK or one token each)."""

    def __init__(self, like: torch.Tensor):
        self.like, self.buf = like, None

    def pair(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.numel()
        if self.buf is None or self.buf.numel() < 2 * n:
            self.buf = self.like.new_empty(2 * n)
        return self.buf[:n].view(x.shape), self.buf[n:2 * n].view(x.shape)


def _swap_mixed(z, pv_mixed, runs: HeadRuns, h0: int, h1: int, scratch: _Scratch) -> None:
    """Swap z's mixed heads h0:h1 with their saved P V, block by block."""
    m0 = runs.mixed_position(h0)
    for bs, ts in _blocks(z, h0, h1):
        x, y = z[bs, ts, h0:h1], pv_mixed[bs, ts, m0:m0 + h1 - h0]  # (B', T', h, Dh)
        tmp = scratch.pair(x)[0]
        tmp.copy_(x)
        x.copy_(y)
        y.copy_(tmp)


def with_pv_in_z(z, v, pv_mixed, runs: HeadRuns, use):
    """``use(P V)`` with P V (B, H, T, Dh) written into z's own buffer; z restored after."""
    vt = v.transpose(1, 2)  # (B, T, H, Dh)
    # Alias z (and the saved P V) without their version counters: they are restored.
    zd = z.data
    pmd = pv_mixed.data if pv_mixed is not None else None
    fixes = _pv_into_z(zd, vt, pmd, runs)
    try:
        return use(zd.transpose(1, 2))
    finally:
        _z_from_pv(zd, vt, pmd, runs, fixes)
