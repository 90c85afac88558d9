"""Laplacian and mixed heads at the memory of standard attention (issue #16, item 4).

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads): (a, b) = (0, 1) attention, (1, −1)
Laplacian, anything else a mixed head. The plain composition ``pv = SDPA(q, k, v)`` then
``z = a V + b pv`` keeps two full tensors alive for the backward (SDPA's output ``pv`` and
``z``). :func:`laplacian_attention` writes ``z`` in place into the SDPA output buffer and
saves only q, k, v, z (the input of the output projection, kept anyway), the softmax
log-sum-exp and, for mixed heads only, their ``P V``. The backward needs ``P V`` (the SDPA
kernel's ``out``), head-wise

    P V = z            for attention heads,
    P V = V − z        for Laplacian heads,
    P V = saved copy   for mixed heads.

When the caller passes the packed (B, T, 3, H, Dh) ``qkv`` that q, k, v are views of (what
tokengeo's attention does), the backward allocates qkv's gradient first, writes P V into
its v slot (one pass), lets the kernel read it there and then writes dv over it: no
buffer beyond the gradient itself. Otherwise P V is written into z's own buffer, in
small blocks, and z is restored bit for bit after the kernel (the rare elements where
V − (V − z) ≠ z in floating point are kept aside and written back), so no second full
tensor ever exists; the round-trip test runs in two reused scratch blocks that stay in
cache, so the extra memory traffic is one pass over z and V to write P V and one to
restore z. The kernel is linear in its ``grad_out`` and independent per head: it is
called with ``dz`` itself and its results are scaled by ``b_h`` afterwards (calling it
with ``b ∘ dz`` instead would need a full copy of ``dz``, the memory this module avoids);
then ``dV += a ∘ dz``, ``da_h = Σ dz_h·V_h``, ``db_h = Σ dz_h·(P V)_h``. With the packed
``qkv`` that scaling is written straight into qkv's gradient (one read and one write per
element, the copy ``unbind``'s backward would make anyway), so signs and coefficients
cost no pass of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tokengeo.errors import ConfigError

ATTENTION, LAPLACIAN, MIXED = "attention", "laplacian", "mixed"
_FIXED = {ATTENTION: (0.0, 1.0), LAPLACIAN: (1.0, -1.0)}
_FLASH, _EFFICIENT = 1, 2  # torch._fused_sdp_choice codes (SDPBackend)
# Elements of each of the backward's two scratch blocks (512 KiB in float32: they stay in
# cache, so the transforms of z cost one pass over z and V).
SCRATCH_CHUNK = 1 << 17


@dataclass(frozen=True)
class HeadRuns:
    """Maximal runs of consecutive heads of one kind: ``((start, stop, kind), ...)``."""

    runs: tuple[tuple[int, int, str], ...]

    @property
    def mixed(self) -> tuple[tuple[int, int], ...]:
        return tuple((h0, h1) for h0, h1, kind in self.runs if kind == MIXED)

    def mixed_position(self, h: int) -> int:
        """Index of mixed head ``h`` among the mixed heads."""
        return sum(min(h1, h) - h0 for h0, h1 in self.mixed if h0 < h)

    @property
    def all_attention(self) -> bool:
        return all(kind == ATTENTION for *_, kind in self.runs)


def head_runs(
    coef_a: torch.Tensor, coef_b: torch.Tensor, head_kinds: Sequence[str] | None = None
) -> HeadRuns:
    """Group heads into runs of one kind, from ``head_kinds`` or else from the values.

    With ``head_kinds`` the caller promises that ``attention`` / ``laplacian`` heads have
    the fixed (a, b) of their kind (no host read); without it the (H,) coefficients are
    read (one small device-to-host copy) and a head is attention / Laplacian when its
    values are exactly (0, 1) / (1, −1), mixed otherwise.
    """
    if head_kinds is None:
        pairs = zip(coef_a.tolist(), coef_b.tolist(), strict=True)
        head_kinds = [next((k for k, ab in _FIXED.items() if ab == p), MIXED) for p in pairs]
    elif len(head_kinds) != coef_a.shape[0] or set(head_kinds) - {ATTENTION, LAPLACIAN, MIXED}:
        raise ConfigError(
            f"head_kinds={tuple(head_kinds)!r} must give one of 'attention', 'laplacian', "
            f"'mixed' for each of the {coef_a.shape[0]} heads")
    runs: list[tuple[int, int, str]] = []
    for h, kind in enumerate(head_kinds):
        if runs and runs[-1][2] == kind:
            runs[-1] = (runs[-1][0], h + 1, kind)
        else:
            runs.append((h, h + 1, kind))
    return HeadRuns(tuple(runs))


def compose(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, coef_a: torch.Tensor,
    coef_b: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False,
    dropout_p: float = 0.0, scale: float | None = None,
) -> torch.Tensor:
    """The plain composition (the fallback): ``a V + b SDPA(q, k, v)`` as (B, T, H, Dh)."""
    pv = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
    )  # (B, H, T, Dh)
    a, b = coef_a.view(1, 1, -1, 1), coef_b.view(1, 1, -1, 1)
    return a * v.transpose(1, 2) + b * pv.transpose(1, 2)  # (B, T, H, Dh)


def laplacian_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    coef_a: torch.Tensor,
    coef_b: torch.Tensor,
    *,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    head_kinds: Sequence[str] | None = None,
    qkv: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-head ``z_h = a_h V_h + b_h softmax(q_h k_hᵀ·scale + mask) V_h``, as (B, T, H, Dh).

    q, k, v: (B, H, T, Dh) (views of one qkv projection are fine); coef_a, coef_b: (H,)
    buffers or learnable parameters (gradients flow to both); attn_mask, is_causal,
    dropout_p, scale: as in ``F.scaled_dot_product_attention``; ``head_kinds``: optional
    per-head ``attention`` / ``laplacian`` / ``mixed`` (see :func:`head_runs`; pass it to
    avoid reading the coefficients on the host). The result is contiguous in the
    (B, T, H, Dh) layout, so ``z.reshape(B, T, H * Dh)`` is a view for the output
    projection. Coefficients act in q's dtype (under autocast, the autocast dtype).

    ``qkv``: optionally the (B, T, 3, H, Dh) tensor that q, k, v are
    ``qkv.unbind(2)`` of, transposed (a qkv projection's output viewed per head). The
    gradient then goes to ``qkv`` directly, each of dq, dk, dv written once into it with
    the heads' scaling folded in (the copy ``unbind``'s backward would make anyway), and
    q, k, v get none of their own: pass it only when nothing watches their gradients.

    The memory-lean kernel (see the module docstring) runs when the device has a fused
    SDPA kernel that returns the log-sum-exp for these inputs (CPU: the flash kernel;
    CUDA: flash or memory-efficient, without ``attn_mask``). The plain composition
    :func:`compose` (identical math) runs instead when: ``dropout_p > 0`` (the kernel's
    dropout mask cannot be replayed), ``attn_mask`` requires grad or is neither bool nor
    floating, the kernel would not be chosen by SDPA (``torch._fused_sdp_choice``), or the
    device is neither CPU nor CUDA. Double backward (``create_graph=True``) recomputes the
    composition with the math SDPA kernel inside the backward, so it is exact too.
    ``z`` is saved for the backward: modify it in place (e.g. an ablation hook) only in
    no-grad code, or clone it first; autograd raises otherwise.
    """
    _check_shapes(q, k, v, coef_a, coef_b)
    q, k, v, attn_mask = _autocast(q, k, v, attn_mask)
    a, b = coef_a.to(q.dtype), coef_b.to(q.dtype)
    backend = _fused_backend(q, k, v, attn_mask, is_causal, dropout_p, scale)
    if backend is None:
        return compose(q, k, v, a, b, attn_mask, is_causal, dropout_p, scale)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
            ~attn_mask, float("-inf"))  # the additive mask SDPA builds too
    runs = head_runs(a, b, head_kinds)
    if qkv is not None and _check_packed(qkv, q, k, v):
        q, k, v = q.detach(), k.detach(), v.detach()  # their gradient goes to qkv
    else:
        qkv = None
    return _LaplacianSDPA.apply(q, k, v, a, b, attn_mask, is_causal, scale, runs, backend, qkv)


def _check_packed(qkv, q, k, v) -> bool:
    """Whether the gradient can go to ``qkv`` (False when q, k, v were cast from it)."""
    if not qkv.requires_grad or any(t.dtype != qkv.dtype for t in (q, k, v)):
        return False
    B, H, T, Dh = q.shape
    ok = qkv.shape == (B, T, 3, H, Dh) and all(
        t.data_ptr() == u.data_ptr() and t.stride() == u.stride()
        for t, u in zip((q, k, v), _heads_of(qkv), strict=True))
    if not ok:
        raise ConfigError(
            f"qkv (shaped {tuple(qkv.shape)}) must be the (B, T, 3, H, Dh) tensor whose "
            f"unbind(2), transposed, gives q, k, v (shaped {tuple(q.shape)}); pass q, k, v "
            f"from it or leave qkv out")
    return True


def _check_shapes(q, k, v, coef_a, coef_b) -> None:
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ConfigError(
            f"laplacian_attention needs q, k, v of one shape (B, H, T, Dh) (V − P V needs "
            f"as many keys as queries); got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}")
    H = q.shape[1]
    if coef_a.shape != (H,) or coef_b.shape != (H,):
        raise ConfigError(
            f"coef_a and coef_b must be shaped ({H},), one per head; got "
            f"{tuple(coef_a.shape)} and {tuple(coef_b.shape)}")


def _autocast(q, k, v, attn_mask):
    """Cast as autocast casts ``F.scaled_dot_product_attention`` (lower-precision list)."""
    dev = q.device.type
    if not torch.is_autocast_enabled(dev):
        return q, k, v, attn_mask
    dtype = torch.get_autocast_dtype(dev)
    q, k, v = (t.to(dtype) if t.is_floating_point() else t for t in (q, k, v))
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.to(dtype)
    return q, k, v, attn_mask


def _fused_backend(q, k, v, attn_mask, is_causal, dropout_p, scale) -> int | None:
    """The SDPA kernel the lean path uses, or None for the composition (docstring rule)."""
    if dropout_p > 0 or q.device.type not in ("cpu", "cuda"):
        return None
    if attn_mask is not None and (attn_mask.requires_grad or not (
            attn_mask.dtype == torch.bool or attn_mask.is_floating_point())):
        return None
    if q.device.type == "cuda" and attn_mask is not None:
        return None
    choice = torch._fused_sdp_choice(q, k, v, attn_mask, 0.0, is_causal, scale=scale)
    if q.device.type == "cpu":
        return _FLASH if choice == _FLASH else None
    return choice if choice in (_FLASH, _EFFICIENT) else None


def _sdpa_forward(backend, q, k, v, attn_mask, is_causal, scale):
    """(out (B, H, T, Dh), stats): SDPA's output and what its backward kernel needs."""
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)
        return out, (lse,)
    if backend == _FLASH:  # CUDA; not exercised by the CPU test suite
        aten = torch.ops.aten
        out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_flash_attention(
            q, k, v, 0.0, is_causal, False, scale=scale)
        return out, (lse, cq, ck, mq, mk, seed, offset)
    out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, is_causal, scale=scale)
    return out, (lse, seed, offset)


def _sdpa_backward(backend, g, q, k, v, out, stats, attn_mask, is_causal, scale):
    """(dq, dk, dv) of SDPA for grad_out ``g``, all (B, H, T, Dh)."""
    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, out, stats[0], 0.0, is_causal, attn_mask=attn_mask, scale=scale)
    if backend == _FLASH:
        lse, cq, ck, mq, mk, seed, offset = stats
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            g, q, k, v, out, lse, cq, ck, mq, mk, 0.0, is_causal, seed, offset, scale=scale)
    lse, seed, offset = stats
    dq, dk, dv, _ = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
        g, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False], is_causal,
        scale=scale)
    return dq, dk, dv


def _combine_in_place(z, v, a, b, runs: HeadRuns) -> None:
    """z ← a V + b z head-wise, z holding P V: (B, T, H, Dh) each, no full temporary."""
    for h0, h1, kind in runs.runs:
        zr, vr = z[:, :, h0:h1], v[:, :, h0:h1]  # (B, T, h, Dh)
        if kind == LAPLACIAN:
            torch.sub(vr, zr, out=zr)
        elif kind == MIXED:
            zr.mul_(b[h0:h1].view(1, 1, -1, 1)).addcmul_(a[h0:h1].view(1, 1, -1, 1), vr)


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


def _pv_into(dst, z, v, pv_mixed, runs: HeadRuns) -> None:
    """dst ← P V head-wise from z, V and the saved mixed heads; all (B, T, ·, Dh)."""
    for h0, h1, kind in runs.runs:
        out = dst[:, :, h0:h1]
        if kind == ATTENTION:
            out.copy_(z[:, :, h0:h1])
        elif kind == LAPLACIAN:
            torch.sub(v[:, :, h0:h1], z[:, :, h0:h1], out=out)
        else:
            m0 = runs.mixed_position(h0)
            out.copy_(pv_mixed[:, :, m0:m0 + h1 - h0])


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


def _coef_grads(g, v, pv) -> tuple[torch.Tensor, torch.Tensor]:
    """da_h = Σ g_h·V_h, db_h = Σ g_h·P V_h over batch, tokens, dims; all (B, H, T, Dh)."""
    da = torch.stack([(g[i] * v[i]).sum((1, 2)) for i in range(g.shape[0])]).sum(0)
    db = torch.stack([(g[i] * pv[i]).sum((1, 2)) for i in range(g.shape[0])]).sum(0)
    return da, db


def _scale_grads(grads, g, a, b, runs: HeadRuns, outs=None) -> None:
    """Head-wise dq, dk ← b dq, b dk and dv ← b dv + a g, all (B, H, T, Dh), into ``outs``.

    The SDPA backward is linear in grad_out and independent per head, so this turns its
    results ``grads`` = (dq, dk, dv) for grad_out = g into those for grad_out = b g, plus
    the identity part a g. ``outs`` (default: ``grads``, in place) may be views of another
    buffer (the packed qkv gradient): then attention heads are copied, and every element
    is read and written once either way.
    """
    outs = grads if outs is None else outs
    for h0, h1, kind in runs.runs:
        hs = (slice(None), slice(h0, h1))
        (sq, sk, sv), (oq, ok, ov) = (t[hs] for t in grads), (t[hs] for t in outs)
        if kind == ATTENTION:
            if outs is not grads:
                for o, t in ((oq, sq), (ok, sk), (ov, sv)):
                    o.copy_(t)
        elif kind == LAPLACIAN:
            torch.neg(sq, out=oq)
            torch.neg(sk, out=ok)
            torch.sub(g[hs], sv, out=ov)
        else:
            bh, ah = b[h0:h1].view(1, -1, 1, 1), a[h0:h1].view(1, -1, 1, 1)
            torch.mul(sq, bh, out=oq)
            torch.mul(sk, bh, out=ok)
            torch.mul(sv, bh, out=ov).addcmul_(ah, g[hs])


def _heads_of(qkv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, T, Dh) views of a packed (B, T, 3, H, Dh) tensor."""
    return tuple(x.transpose(1, 2) for x in qkv.unbind(2))


class _LaplacianSDPA(torch.autograd.Function):
    """z = a V + b SDPA(q, k, v), saving q, k, v, z, the log-sum-exp and mixed heads' P V."""

    @staticmethod
    def forward(ctx, q, k, v, a, b, attn_mask, is_causal, scale, runs, backend, qkv):
        # qkv (B, T, 3, H, Dh) or None: when given, q, k, v are its (detached) views and
        # the gradient goes to it.
        out, stats = _sdpa_forward(backend, q, k, v, attn_mask, is_causal, scale)
        z = out.transpose(1, 2)  # (B, T, H, Dh): contiguous for the CPU kernel
        if not z.is_contiguous():
            z = z.contiguous()
        vt = v.transpose(1, 2)  # (B, T, H, Dh)
        pv_mixed = None
        if runs.mixed:  # (B, T, n_mixed, Dh): P V of the mixed heads, before combining
            pv_mixed = torch.cat([z[:, :, h0:h1] for h0, h1 in runs.mixed], dim=2)
        _combine_in_place(z, vt, a, b, runs)
        ctx.save_for_backward(q, k, v, z, a, b, attn_mask, pv_mixed, qkv, *stats)
        ctx.is_causal, ctx.scale, ctx.runs, ctx.backend = is_causal, scale, runs, backend
        return z

    @staticmethod
    def backward(ctx, dz):
        q, k, v, z, a, b, attn_mask, pv_mixed, qkv, *stats = ctx.saved_tensors
        if torch.is_grad_enabled():
            return _differentiable_backward(ctx, dz, q, k, v, a, b, attn_mask, qkv)
        g = dz.transpose(1, 2)  # (B, H, T, Dh)
        coefs = ctx.needs_input_grad[3] or ctx.needs_input_grad[4]

        def use(pv):  # P V (B, H, T, Dh) -> da, db and SDPA's (dq, dk, dv) for grad_out g
            da, db = _coef_grads(g, v, pv) if coefs else (None, None)
            return da, db, _sdpa_backward(
                ctx.backend, g, q, k, v, pv, stats, attn_mask, ctx.is_causal, ctx.scale)

        if qkv is not None:  # P V goes into the v slot of qkv's gradient, then dv over it
            dqkv = torch.empty_like(qkv)  # (B, T, 3, H, Dh)
            outs = _heads_of(dqkv)  # (B, H, T, Dh) views
            _pv_into(outs[2].transpose(1, 2), z, v.transpose(1, 2), pv_mixed, ctx.runs)
            da, db, grads = use(outs[2])
            _scale_grads(grads, g, a, b, ctx.runs, outs=outs)
            return None, None, None, da, db, None, None, None, None, None, dqkv
        da, db, grads = _with_pv_in_z(z, v, pv_mixed, ctx.runs, use)
        _scale_grads(grads, g, a, b, ctx.runs)
        return *grads, da, db, None, None, None, None, None, None


def _with_pv_in_z(z, v, pv_mixed, runs: HeadRuns, use):
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


def _differentiable_backward(ctx, dz, q, k, v, a, b, attn_mask, qkv):
    """Backward for ``create_graph=True``: differentiate the recomputed composition."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    inputs = [q, k, v, a, b, None, None, None, None, None, qkv]
    wanted = [i for i, need in enumerate(ctx.needs_input_grad) if need]
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        if qkv is not None:
            q, k, v = _heads_of(qkv)
        z = compose(q, k, v, a, b, attn_mask, ctx.is_causal, 0.0, ctx.scale)
        grads = torch.autograd.grad(z, [inputs[i] for i in wanted], dz, create_graph=True)
    out = [None] * 11
    for i, g in zip(wanted, grads, strict=True):
        out[i] = g
    return tuple(out)
