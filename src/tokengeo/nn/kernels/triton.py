"""A fused Triton kernel for Laplacian, attention and mixed heads (FlashAttention-2 style).

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` with ``P_h = softmax(s·q_h k_hᵀ [+ causal
mask])`` (Zhang & Papyan, "Laplacian Heads Improve Transformers by Smoothing Token
Representations", arXiv 2602.09297, Eq. 2 with P replaced by I − P): (a, b) = (0, 1) is an
attention head, (1, −1) a Laplacian head, anything else a mixed head. The kernels follow
FlashAttention-2 (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
Partitioning", 2023, Algorithms 1 and 2): tiles of queries and keys, an online softmax, the
T × T matrix never stored; only the epilogue and the backward's bookkeeping differ.

Forward (one program per query tile and head), with ``m``, ``ℓ`` the running row maximum
and sum in base 2 (``s₂ = s·log₂e·q kᵀ``)::

    O = P V = (Σ_j 2^(s₂_ij − m_i) V_j) / ℓ_i,     L_i = m_i + log₂ ℓ_i,
    z = a·V + b·O            (the epilogue; written straight into the (B, T, H, Dh) layout)

Saved for the backward: q, k, v, z (the result, which the caller keeps anyway) and L. P V
itself is never saved, for any head kind, because the backward needs it only through

    δ_i  = Σ_d dO_id O_id with dO = b·dz   =  Σ_d dz_id (z_id − a V_id)      (no division by b)
    db_h = Σ_ij P_ij (dz_i · V_j)          =  Σ_j V_j · (Pᵀ dz)_j           (from the recomputed P)

with no division by b, and db from P recomputed in float32. For attention and Laplacian
heads (|a| ≤ |b|) the rounding of the stored z costs δ what rounding O costs in
FlashAttention. When |b_h| < |a_h| (a mixed head leaning to V), z − a V cancels and would
bring ε·|a V| into δ, so the dQ kernel recomputes δ_i = b Σ_j P_ij (dz_i · V_j) exactly in
one more pass over the keys, for those heads only (decided per head on the device: no host
read of the coefficients, no saved P V). The rest is FlashAttention-2's backward with
``dO = b·dz``, tile by tile (P recomputed from L)::

    dS_ij = P_ij (b·(dz_i · V_j) − δ_i),   dQ = s·dS K,   dK = s·dSᵀ Q,
    dV = b·Pᵀ dz + a·dz,   da_h = Σ dz_h · V_h.

GQA: k and v may have Hkv heads with H % Hkv == 0 (query head h reads key/value head
``h // (H / Hkv)``; one backward program sums the group's contributions, no atomics).
Inputs in float32, bfloat16 or float16 (products accumulate in float32; float32 products
use TF32 when ``torch.backends.cuda.matmul.allow_tf32`` allows it, else 3×TF32),
head size 16, 32, 64 or 128, any T (tiles are masked at the end).

Triton is optional: the kernels are plain functions here, turned into Triton kernels on
first use (:func:`_kernels`), so this module imports without Triton. ``TRITON_INTERPRET=1``
runs them in Triton's interpreter on CPU tensors (the tests do); it must be set before the
process first imports triton, which wraps its own library for one mode at import (a clear
ConfigError says so otherwise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError, MissingDependencyError

LOG2E = 1.4426950408889634
HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INSTALL = "pip install triton (or pip install 'tokengeo[dev]')"


def triton_available() -> bool:
    """Whether the ``triton`` package can be imported (it need not find a GPU)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# --------------------------------------------------------------------------- kernels
# Plain functions, compiled by triton.jit in _kernels(); `tl` (triton.language) is bound
# there too, so that this module imports without Triton.
tl = None


def _tile_start(CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """First query of this program's tile; causal grids run the last (longest) tiles first,
    so that the short ones fill the machine at the end (FlashAttention-2, Section 3.2)."""
    pid = tl.program_id(0)
    if CAUSAL:
        pid = tl.num_programs(0) - 1 - pid
    return pid * BLOCK_M


def _rows(base, stride, offs, offs_d, ok):
    """The tile of rows ``offs`` (BLOCK, Dh) at ``base``, rows where ``ok`` is False read 0."""
    return tl.load(base + offs[:, None] * stride + offs_d[None, :], mask=ok[:, None], other=0.0)


def _cols(base, stride, offs, offs_d, ok):
    """The same tile transposed, (Dh, BLOCK): rows of K or V read as columns."""
    return tl.load(base + offs[None, :] * stride + offs_d[:, None], mask=ok[None, :], other=0.0)


def _key_rows(base, stride, offs_n, offs_d, T, MASKED: tl.constexpr):
    """A tile of K or V (BLOCK_N, Dh); MASKED: the last tile, keys past T read 0."""
    if MASKED:
        tile = _rows(base, stride, offs_n, offs_d, offs_n < T)
    else:
        tile = tl.load(base + offs_n[:, None] * stride + offs_d[None, :])
    return tile


def _key_cols(base, stride, offs_n, offs_d, T, MASKED: tl.constexpr):
    """The same tile transposed (Dh, BLOCK_N)."""
    if MASKED:
        tile = _cols(base, stride, offs_n, offs_d, offs_n < T)
    else:
        tile = tl.load(base + offs_n[None, :] * stride + offs_d[:, None])
    return tile


def _keep(offs_m, offs_n, T, CAUSAL: tl.constexpr):
    """Which (query, key) pairs of a masked tile count: keys before T, and not after the
    query when causal. (BLOCK_M, BLOCK_N) bool."""
    keep = offs_n[None, :] < T
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= offs_n[None, :])
    return keep


def _recomputed_p(q, kT, lse, offs_m, offs_n, T, qk_scale, MASKED: tl.constexpr,
                  CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """P of a tile from the saved log-sum-exp L (base 2): 2^(s₂ − L), masked pairs 0."""
    p = tl.math.exp2(tl.dot(q, kT, input_precision=PREC) * qk_scale - lse[:, None])
    if MASKED:
        p = tl.where(_keep(offs_m, offs_n, T, CAUSAL), p, 0.0)
    return p


def _key_range(start_m, T, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """(n_full, n_end): key tiles [0, n_full) need no mask, [n_full, n_end) do; causal
    tiles skip the keys after this query tile's diagonal block."""
    if CAUSAL:
        n_full = start_m
        n_end = tl.minimum(start_m + BLOCK_M, T)
    else:
        n_full = (T // BLOCK_N) * BLOCK_N
        n_end = T
    return n_full, n_end


def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_d,
               lo, hi, T, qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
               CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """Online softmax over key tiles [lo, hi): FlashAttention-2 Algorithm 1, lines 8-10."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kT = _key_cols(k_base, stride_kt, offs_n, offs_d, T, MASKED)  # (Dh, BLOCK_N)
        s = tl.dot(q, kT, input_precision=PREC) * qk_scale  # (BLOCK_M, BLOCK_N), base 2
        if MASKED:
            s = tl.where(_keep(offs_m, offs_n, T, CAUSAL), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _key_rows(v_base, stride_vt, offs_n, offs_d, T, MASKED)  # (BLOCK_N, Dh)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PREC)
        m_i = m_new
    return acc, l_i, m_i


def _fwd_kernel(Q, K, V, A, B, Z, LSE,
                sqb, sqh, sqt, skb, skh, skt, svb, svh, svt,
                T, H, qk_scale,
                GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """z = a·V + b·softmax(s q kᵀ) V for one query tile of one (batch, head); stores L."""
    start_m = _tile_start(CAUSAL, BLOCK_M)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = bh % H
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < T
    q = _rows(Q + b * sqb + h * sqh, sqt, offs_m, offs_d, row_ok)  # (BLOCK_M, Dh)
    k_base = K + b * skb + (h // GROUP) * skh
    v_base = V + b * svb + (h // GROUP) * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    n_full, n_end = _key_range(start_m, T, CAUSAL, BLOCK_M, BLOCK_N)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, skt, svt, offs_m, offs_d,
                               0, n_full, T, qk_scale, BLOCK_N, False, CAUSAL, PREC)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, skt, svt, offs_m, offs_d,
                               n_full, n_end, T, qk_scale, BLOCK_N, True, CAUSAL, PREC)
    pv = acc * (1.0 / l_i)[:, None]  # P V, (BLOCK_M, Dh)
    coef_a = tl.load(A + h).to(tl.float32)
    coef_b = tl.load(B + h).to(tl.float32)
    v_rows = _rows(v_base, svt, offs_m, offs_d, row_ok)
    z = coef_a * v_rows.to(tl.float32) + coef_b * pv
    z_ptr = Z + ((b * T + offs_m[:, None]) * H + h) * HEAD_DIM + offs_d[None, :]
    tl.store(z_ptr, z.to(Z.dtype.element_ty), mask=row_ok[:, None])
    tl.store(LSE + bh.to(tl.int64) * T + offs_m, m_i + tl.math.log2(l_i), mask=row_ok)


def _dq_tiles(dq, q, dz, lse, delta, coef_b, k_base, v_base, stride_kt, stride_vt, offs_m,
              offs_d, lo, hi, T, qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
              CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """dQ += dS K over key tiles [lo, hi) (FlashAttention-2 Algorithm 2, dQ part)."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kT = _key_cols(k_base, stride_kt, offs_n, offs_d, T, MASKED)  # (Dh, BLOCK_N)
        vT = _key_cols(v_base, stride_vt, offs_n, offs_d, T, MASKED)
        p = _recomputed_p(q, kT, lse, offs_m, offs_n, T, qk_scale, MASKED, CAUSAL, PREC)
        dpz = tl.dot(dz, vT, input_precision=PREC)  # dz Vᵀ, (BLOCK_M, BLOCK_N)
        ds = p * (coef_b * dpz - delta[:, None])
        dq = tl.dot(ds.to(kT.dtype), tl.trans(kT), dq, input_precision=PREC)
    return dq


def _rowdot_tiles(rowdot, q, dz, lse, k_base, v_base, stride_kt, stride_vt, offs_m, offs_d,
                  lo, hi, T, qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                  CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """rowdot_i += Σ_j P_ij (dz_i · V_j) over key tiles [lo, hi): Σ_d dz_id (P V)_id."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kT = _key_cols(k_base, stride_kt, offs_n, offs_d, T, MASKED)  # (Dh, BLOCK_N)
        vT = _key_cols(v_base, stride_vt, offs_n, offs_d, T, MASKED)
        p = _recomputed_p(q, kT, lse, offs_m, offs_n, T, qk_scale, MASKED, CAUSAL, PREC)
        rowdot += tl.sum(p * tl.dot(dz, vT, input_precision=PREC), 1)
    return rowdot


def _bwd_dq_kernel(Q, K, V, A, B, Z, DZ, LSE, DELTA, DQ,
                   sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sdb, sdt, sdh,
                   T, H, qk_scale, scale,
                   GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr):
    """δ = Σ_d dz (z − a V) (stored for the dK/dV kernel) and dQ, for one query tile."""
    start_m = _tile_start(CAUSAL, BLOCK_M)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = bh % H
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < T
    q = _rows(Q + b * sqb + h * sqh, sqt, offs_m, offs_d, row_ok)  # (BLOCK_M, Dh)
    dz = _rows(DZ + b * sdb + h * sdh, sdt, offs_m, offs_d, row_ok)
    z = _rows(Z + (b * T * H + h) * HEAD_DIM, H * HEAD_DIM, offs_m, offs_d, row_ok)
    k_base = K + b * skb + (h // GROUP) * skh
    v_base = V + b * svb + (h // GROUP) * svh
    v_rows = _rows(v_base, svt, offs_m, offs_d, row_ok)
    coef_a = tl.load(A + h).to(tl.float32)
    coef_b = tl.load(B + h).to(tl.float32)
    row = bh.to(tl.int64) * T + offs_m
    lse = tl.load(LSE + row, mask=row_ok, other=0.0)
    n_full, n_end = _key_range(start_m, T, CAUSAL, BLOCK_M, BLOCK_N)
    # δ_i = Σ_d dO_id O_id with dO = b dz and O = P V, i.e. Σ_d dz (z − a V): no 1/b.
    delta = tl.sum(dz.to(tl.float32) * (z.to(tl.float32) - coef_a * v_rows.to(tl.float32)), 1)
    if tl.abs(coef_b) < tl.abs(coef_a):
        # z − a V cancels: its rounding (ε·|a V|) would swamp b P V. Recompute δ exactly as
        # b Σ_j P_ij (dz_i · V_j) in one more pass over the keys (mixed heads only).
        rowdot = tl.zeros((BLOCK_M,), tl.float32)
        rowdot = _rowdot_tiles(rowdot, q, dz, lse, k_base, v_base, skt, svt, offs_m, offs_d,
                               0, n_full, T, qk_scale, BLOCK_N, False, CAUSAL, PREC)
        rowdot = _rowdot_tiles(rowdot, q, dz, lse, k_base, v_base, skt, svt, offs_m, offs_d,
                               n_full, n_end, T, qk_scale, BLOCK_N, True, CAUSAL, PREC)
        delta = coef_b * rowdot
    tl.store(DELTA + row, delta, mask=row_ok)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    dq = _dq_tiles(dq, q, dz, lse, delta, coef_b, k_base, v_base, skt, svt, offs_m, offs_d,
                   0, n_full, T, qk_scale, BLOCK_N, False, CAUSAL, PREC)
    dq = _dq_tiles(dq, q, dz, lse, delta, coef_b, k_base, v_base, skt, svt, offs_m, offs_d,
                   n_full, n_end, T, qk_scale, BLOCK_N, True, CAUSAL, PREC)
    dq_ptr = DQ + (bh.to(tl.int64) * T + offs_m[:, None]) * HEAD_DIM + offs_d[None, :]
    tl.store(dq_ptr, (dq * scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])


def _dkdv_tiles(dk, dv_h, k, v, coef_b, q_base, dz_base, lse_base, delta_base, sqt, sdt,
                offs_n, offs_d, lo, hi, T, qk_scale, BLOCK_M: tl.constexpr,
                MASKED: tl.constexpr, PREC: tl.constexpr):
    """dK += dSᵀ Q and (Pᵀ dz) over query tiles [lo, hi) (FlashAttention-2 Algorithm 2).

    Query rows past T load L = +inf, so their P is 0 without a mask; MASKED adds the
    causal mask of the diagonal tiles.
    """
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < T
        qT = _cols(q_base, sqt, offs_m, offs_d, row_ok)  # (Dh, BLOCK_M)
        lse = tl.load(lse_base + offs_m, mask=row_ok, other=float("inf"))
        pT = tl.math.exp2(tl.dot(k, qT, input_precision=PREC) * qk_scale - lse[None, :])
        if MASKED:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)  # (BLOCK_N, BLOCK_M)
        dz = _rows(dz_base, sdt, offs_m, offs_d, row_ok)  # (BLOCK_M, Dh)
        dv_h = tl.dot(pT.to(dz.dtype), dz, dv_h, input_precision=PREC)
        delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
        dpT = tl.dot(v, tl.trans(dz), input_precision=PREC)  # (dz Vᵀ)ᵀ, (BLOCK_N, BLOCK_M)
        dsT = pT * (coef_b * dpT - delta[None, :])
        dk = tl.dot(dsT.to(qT.dtype), tl.trans(qT), dk, input_precision=PREC)
    return dk, dv_h


def _bwd_dkdv_kernel(Q, K, V, A, B, DZ, LSE, DELTA, DK, DV, DA_PART, DB_PART,
                     sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sdb, sdt, sdh,
                     T, H, HKV, N_PART, qk_scale, scale,
                     GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr,
                     COEF_GRAD: tl.constexpr):
    """dK, dV of one key tile of one key/value head, summed over its GROUP query heads;
    per-program partial sums of da_h = Σ dz_h·V and db_h = Σ V·(Pᵀ dz_h)."""
    pid_n = tl.program_id(0)
    start_n = pid_n * BLOCK_N
    bhk = tl.program_id(1)
    b = (bhk // HKV).to(tl.int64)
    hk = bhk % HKV
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = offs_n < T
    k = _rows(K + b * skb + hk * skh, skt, offs_n, offs_d, col_ok)  # (BLOCK_N, Dh)
    v = _rows(V + b * svb + hk * svh, svt, offs_n, offs_d, col_ok)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    for g in tl.static_range(GROUP):
        h = hk * GROUP + g
        coef_a = tl.load(A + h).to(tl.float32)
        coef_b = tl.load(B + h).to(tl.float32)
        q_base = Q + b * sqb + h * sqh
        dz_base = DZ + b * sdb + h * sdh
        row_base = (b * H + h) * T
        dv_h = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)  # Pᵀ dz_h
        if CAUSAL:  # queries before this key tile see none of it
            m_diag_end = tl.minimum(start_n + BLOCK_N, T)
            dk, dv_h = _dkdv_tiles(dk, dv_h, k, v, coef_b, q_base, dz_base, LSE + row_base,
                                   DELTA + row_base, sqt, sdt, offs_n, offs_d, start_n,
                                   m_diag_end, T, qk_scale, BLOCK_M, True, PREC)
            dk, dv_h = _dkdv_tiles(dk, dv_h, k, v, coef_b, q_base, dz_base, LSE + row_base,
                                   DELTA + row_base, sqt, sdt, offs_n, offs_d,
                                   start_n + BLOCK_N, T, T, qk_scale, BLOCK_M, False, PREC)
        else:  # two loops, not one: as one, Triton 3.6's ptxas serialised its wgmma (C7515)
            dk, dv_h = _dkdv_tiles(dk, dv_h, k, v, coef_b, q_base, dz_base, LSE + row_base,
                                   DELTA + row_base, sqt, sdt, offs_n, offs_d, 0, start_n, T,
                                   qk_scale, BLOCK_M, False, PREC)
            dk, dv_h = _dkdv_tiles(dk, dv_h, k, v, coef_b, q_base, dz_base, LSE + row_base,
                                   DELTA + row_base, sqt, sdt, offs_n, offs_d, start_n, T, T,
                                   qk_scale, BLOCK_M, False, PREC)
        dz_rows = _rows(dz_base, sdt, offs_n, offs_d, col_ok).to(tl.float32)  # (BLOCK_N, Dh)
        dv += coef_b * dv_h + coef_a * dz_rows
        if COEF_GRAD:
            part = (b * H + h) * N_PART + pid_n
            tl.store(DA_PART + part, tl.sum(tl.sum(dz_rows * v.to(tl.float32), 1), 0))
            tl.store(DB_PART + part, tl.sum(tl.sum(dv_h * v.to(tl.float32), 1), 0))
    out = (bhk.to(tl.int64) * T + offs_n[:, None]) * HEAD_DIM + offs_d[None, :]
    tl.store(DK + out, (dk * scale).to(DK.dtype.element_ty), mask=col_ok[:, None])
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=col_ok[:, None])


_HELPERS = {fn.__name__: fn for fn in (
    _tile_start, _rows, _cols, _key_rows, _key_cols, _keep, _recomputed_p, _key_range, _fwd_tiles,
    _dq_tiles, _rowdot_tiles, _dkdv_tiles)}
_KERNELS = {"fwd": _fwd_kernel, "dq": _bwd_dq_kernel, "dkdv": _bwd_dkdv_kernel}
_built: dict = {}


def _kernels() -> dict:
    """The Triton kernels, built on first use (rebuilt if ``TRITON_INTERPRET`` changed).

    ``triton.jit`` decides between compiling and interpreting when it wraps a function; the
    helpers are bound as module globals, where the kernels' bodies look them up by name.
    """
    mode = _interpreting()
    if _built.get("mode") is not mode:
        triton = _import_triton()
        import triton.language as tl

        _check_interpreter_mode(tl, mode)
        module = globals()
        module["tl"] = tl
        for name, fn in _HELPERS.items():
            module[name] = triton.jit(fn)
        _built.clear()
        _built.update({name: triton.jit(fn) for name, fn in _KERNELS.items()}, mode=mode)
    return _built


def _check_interpreter_mode(tl, interpreting: bool) -> None:
    """Triton wraps its own library functions (``tl.sum``, ``tl.zeros``) for compilation or
    for the interpreter once, when it is imported: the mode must not change afterwards."""
    imported_interpreting = type(tl.zeros).__name__ == "InterpretedFunction"
    if imported_interpreting != interpreting:
        now = "set" if interpreting else "unset"
        raise ConfigError(
            f"TRITON_INTERPRET is {now} now but was not when triton was first imported; "
            f"set (or unset) it before the first `import triton` of the process (e.g. run the "
            f"interpreted kernels in a subprocess started with TRITON_INTERPRET=1)")


def _import_triton():
    try:
        import triton
    except ImportError as exc:
        raise MissingDependencyError(
            f"laplacian_attention_triton needs Triton, which is not installed: {INSTALL}"
        ) from exc
    return triton


# --------------------------------------------------------------------------- launch


@dataclass(frozen=True)
class TileConfig:
    """Tile sizes and launch settings of the three kernels for one (dtype, Dh)."""

    fwd_m: int
    fwd_n: int
    fwd_warps: int
    dq_m: int
    dq_n: int
    dq_warps: int
    dkdv_m: int
    dkdv_n: int
    dkdv_warps: int
    stages: int

    def __post_init__(self) -> None:
        sizes = (self.fwd_m, self.fwd_n, self.dq_m, self.dq_n, self.dkdv_m, self.dkdv_n)
        if any(t < 16 or t & (t - 1) for t in sizes) or self.fwd_m % self.fwd_n or (
                self.dq_m % self.dq_n) or self.dkdv_n % self.dkdv_m:
            raise ConfigError(
                f"{self} is not a valid tiling: tiles must be powers of two >= 16, with the "
                f"query tile a multiple of the key tile in the forward and dq kernels and "
                f"the key tile a multiple of the query tile in the dk/dv kernel")


# The interpreter runs each program in numpy: small tiles keep the tests fast and make short
# sequences span several tiles (the masking paths).
INTERPRETER_TILES = TileConfig(32, 16, 1, 32, 16, 1, 16, 32, 1, 1)
# Set to a TileConfig to force it for every call (a tuning hook for benchmarks; tile sizes
# must be powers of two >= 16 with fwd_m % fwd_n == dq_m % dq_n == dkdv_n % dkdv_m == 0).
TILE_OVERRIDE: TileConfig | None = None


def tile_config(dtype: torch.dtype, head_dim: int) -> TileConfig:
    """Tiles for a Hopper GPU (sm_90: 228 KiB shared memory per SM, 64 K registers).

    Shapes after FlashAttention-2 (large query tiles in the forward and dQ kernels, narrow
    query tiles against large key tiles in the dK/dV kernel), chosen among a few candidates
    as the largest that ptxas compiles for sm_90a without spilling registers (Triton 3.6 and
    3.9, compiled on a CPU; not yet timed on a GPU). float32 products run as 3×TF32 (twice
    the operand registers), so float32 takes smaller tiles; its dK/dV kernel still spills
    ~100 bytes at Dh = 64, and at Dh = 128 every float32 tiling tried spills in the
    backward (~1.4 KB), so the least-spilling ones are used.
    """
    if TILE_OVERRIDE is not None:
        return TILE_OVERRIDE
    if _interpreting():
        return INTERPRETER_TILES
    if dtype == torch.float32:
        if head_dim == 128:
            return TileConfig(32, 32, 4, 32, 32, 4, 32, 32, 4, 2)
        return TileConfig(64, 32, 4, 64, 32, 4, 32, 128, 8, 2)
    if head_dim == 128:
        return TileConfig(128, 64, 8, 128, 32, 8, 32, 64, 8, 3)
    return TileConfig(128, 64, 8, 128, 64, 8, 32, 128, 8, 4)


def _dot_precision(dtype: torch.dtype) -> str:
    """How float32 products run: TF32 when torch's matmul may use it, else three TF32
    products per product ("tf32x3", float32-accurate on the tensor cores, as torch's
    memory-efficient SDPA kernel computes float32)."""
    if dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return "tf32x3"
    return "tf32"  # ignored for bfloat16 / float16 operands


def _forward(q, k, v, a, b, causal: bool, scale: float):
    """z (B, T, H, Dh) and L (B, H, T) float32 (base-2 log-sum-exp of the scaled scores)."""
    kern = _kernels()["fwd"]
    B, H, T, D = q.shape
    cfg = tile_config(q.dtype, D)
    z = torch.empty((B, T, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, T), dtype=torch.float32, device=q.device)
    grid = (-(-T // cfg.fwd_m), B * H)
    kern[grid](
        q, k, v, a, b, z, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        T, H, scale * LOG2E, GROUP=H // k.shape[1], HEAD_DIM=D, BLOCK_M=cfg.fwd_m,
        BLOCK_N=cfg.fwd_n, CAUSAL=causal, PREC=_dot_precision(q.dtype),
        num_warps=cfg.fwd_warps, num_stages=cfg.stages)
    return z, lse


def _backward(dz, q, k, v, a, b, z, lse, causal: bool, scale: float, coef_grad: bool):
    """(dq, dk, dv, da, db): the gradients (da, db float32 (H,), None without coef_grad)."""
    kernels = _kernels()
    B, H, T, D = q.shape
    Hkv = k.shape[1]
    cfg = tile_config(q.dtype, D)
    prec = _dot_precision(q.dtype)
    dz = dz.to(q.dtype)
    if dz.stride(-1) != 1:
        dz = dz.contiguous()
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
               dz.stride(0), dz.stride(1), dz.stride(2))  # dz is (B, T, H, Dh)
    delta = torch.empty((B, H, T), dtype=torch.float32, device=q.device)
    dq = torch.empty((B, H, T, D), dtype=q.dtype, device=q.device)
    kernels["dq"][(-(-T // cfg.dq_m), B * H)](
        q, k, v, a, b, z, dz, lse, delta, dq, *strides, T, H, scale * LOG2E, scale,
        GROUP=H // Hkv, HEAD_DIM=D, BLOCK_M=cfg.dq_m, BLOCK_N=cfg.dq_n, CAUSAL=causal,
        PREC=prec, num_warps=cfg.dq_warps, num_stages=cfg.stages)
    dk = torch.empty((B, Hkv, T, D), dtype=k.dtype, device=q.device)
    dv = torch.empty((B, Hkv, T, D), dtype=v.dtype, device=q.device)
    n_part = -(-T // cfg.dkdv_n)
    part_shape = (2, B, H, n_part) if coef_grad else (2, 1)
    parts = torch.empty(part_shape, dtype=torch.float32, device=q.device)
    kernels["dkdv"][(n_part, B * Hkv)](
        q, k, v, a, b, dz, lse, delta, dk, dv, parts[0], parts[1], *strides,
        T, H, Hkv, n_part, scale * LOG2E, scale,
        GROUP=H // Hkv, HEAD_DIM=D, BLOCK_M=cfg.dkdv_m, BLOCK_N=cfg.dkdv_n, CAUSAL=causal,
        PREC=prec, COEF_GRAD=coef_grad, num_warps=cfg.dkdv_warps, num_stages=cfg.stages)
    if not coef_grad:
        return dq, dk, dv, None, None
    da, db = parts.sum(dim=(1, 3))  # (H,) each
    return dq, dk, dv, da, db


class _LaplacianTriton(torch.autograd.Function):
    """Autograd wrapper: saves q, k, v, a, b, z and L; backward = three-kernel recompute."""

    @staticmethod
    def forward(ctx, q, k, v, a, b, causal, scale):
        z, lse = _forward(q, k, v, a, b, causal, scale)
        ctx.save_for_backward(q, k, v, a, b, z, lse)
        ctx.causal, ctx.scale = causal, scale
        return z

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dz):
        q, k, v, a, b, z, lse = ctx.saved_tensors
        coef_grad = ctx.needs_input_grad[3] or ctx.needs_input_grad[4]
        dq, dk, dv, da, db = _backward(dz, q, k, v, a, b, z, lse, ctx.causal, ctx.scale,
                                       coef_grad)
        if coef_grad:
            da, db = da.to(a.dtype), db.to(b.dtype)
        return dq, dk, dv, da, db, None, None


# --------------------------------------------------------------------------- entry


def laplacian_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    coef_a: torch.Tensor,
    coef_b: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Per-head ``z_h = a_h V_h + b_h softmax(scale·q_h k_hᵀ [+ causal mask]) V_h``, fused.

    q: (B, H, T, Dh); k, v: (B, Hkv, T, Dh) with H % Hkv == 0 (GQA: query head h reads
    key/value head h // (H / Hkv)); views with any strides whose last is 1 (e.g. of one
    packed qkv projection) are read in place. coef_a, coef_b: (H,) tensors (gradients flow
    to them when they require grad); they act in q's dtype, as in
    :func:`tokengeo.nn.kernels.laplacian_attention`. ``scale`` defaults to
    1/√Dh; ``is_causal`` masks keys after the query (top-left aligned, as SDPA's).

    Returns z: (B, T, H, Dh), contiguous, so ``z.reshape(B, T, H * Dh)`` is a view for the
    output projection. Dtypes float32, bfloat16, float16 (float32 accumulation); Dh in
    {16, 32, 64, 128}; CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1`` (Triton's
    interpreter: slow, for tests). Autocast casts q, k, v to its dtype first, as it casts
    ``F.scaled_dot_product_attention``. Double backward is not supported. The maths and
    what the backward saves are in the module docstring (FlashAttention-2, Dao 2023).
    """
    q, k, v = _autocast(q, k, v)
    _check_inputs(q, k, v, coef_a, coef_b)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    a = coef_a.to(device=q.device, dtype=q.dtype)
    b = coef_b.to(device=q.device, dtype=q.dtype)
    return _LaplacianTriton.apply(q, k, v, a, b, bool(is_causal), float(scale))


def _autocast(q, k, v):
    """Cast as autocast casts ``F.scaled_dot_product_attention`` (lower-precision list)."""
    dev = q.device.type
    if dev not in ("cuda", "cpu") or not torch.is_autocast_enabled(dev):
        return q, k, v
    dtype = torch.get_autocast_dtype(dev)
    return tuple(t.to(dtype) if t.is_floating_point() else t for t in (q, k, v))


def _check_inputs(q, k, v, coef_a, coef_b) -> None:
    """One clear ConfigError (or MissingDependencyError) per unsupported input."""
    if not triton_available():
        raise MissingDependencyError(
            f"laplacian_attention_triton needs Triton, which is not installed: {INSTALL}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ConfigError(
            f"laplacian_attention_triton needs q, k, v shaped (B, H, T, Dh); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, T, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[2:] != (T, D):
        raise ConfigError(
            f"laplacian_attention_triton needs k and v shaped (B, Hkv, T, Dh) like q "
            f"{tuple(q.shape)} (V − P V needs as many keys as queries); got "
            f"{tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[1] == 0 or H % k.shape[1]:
        raise ConfigError(
            f"q's {H} heads must be a multiple of k/v's {k.shape[1]} heads (grouped-query "
            f"attention); choose Hkv dividing H")
    if D not in HEAD_DIMS:
        raise ConfigError(
            f"head size Dh={D} is not supported by the Triton kernel; choose one of "
            f"{list(HEAD_DIMS)} or use tokengeo.nn.kernels.laplacian_attention")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ConfigError(
            f"laplacian_attention_triton needs q, k, v of one dtype among float32, bfloat16, "
            f"float16; got {q.dtype}, {k.dtype}, {v.dtype}")
    if T == 0 or B == 0 or H == 0:
        raise ConfigError(f"laplacian_attention_triton got an empty input {tuple(q.shape)}")
    _check_device(q, k, v)
    if coef_a.shape != (H,) or coef_b.shape != (H,):
        raise ConfigError(
            f"coef_a and coef_b must be shaped ({H},), one per head; got "
            f"{tuple(coef_a.shape)} and {tuple(coef_b.shape)}")


def _check_device(q, k, v) -> None:
    if k.device != q.device or v.device != q.device:
        raise ConfigError(
            f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if q.device.type == "cuda" or (q.device.type == "cpu" and _interpreting()):
        return
    raise ConfigError(
        f"laplacian_attention_triton runs on CUDA tensors (got {q.device}); on a CPU use "
        f"tokengeo.nn.kernels.laplacian_attention, or set TRITON_INTERPRET=1 to run "
        f"the kernel in Triton's (slow) interpreter")
