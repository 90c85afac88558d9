"""kernel="in_place": fused SDPA with z written in place over its output, in an autograd Function.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads; the reference is
:func:`tokengeo.nn.reference.mix_heads`). The plain composition ``pv = SDPA(q, k, v)`` then
``z = a V + b pv`` keeps two full tensors alive for the backward (SDPA's output ``pv`` and
``z``). :class:`LaplacianSDPA` writes ``z`` in place into the SDPA output buffer and saves
only q, k, v, z (the input of the output projection, kept anyway), the softmax log-sum-exp
and, for mixed heads only, their ``P V``. The backward needs ``P V`` (the SDPA kernel's
``out``), head-wise

    P V = z            for attention heads,
    P V = V − z        for Laplacian heads,
    P V = saved copy   for mixed heads.

Heads of several fixed kinds (e.g. half Laplacian) take whole-tensor passes with the
coefficients laid out as (H, Dh) rows, ``z ← b z + a V`` and ``P V = b (z − a V)``, bitwise
what the per-run passes give (products by 0 and ±1) in fewer operations: on a GPU each is a
launch (the host's cost per call, which bounds short sequences there, is in docs/kernels.md);
on a CPU, for cache-sized tensors, a pass over a slice of heads iterates over every
(token, slice) row, a few dozen elements each, and costs more than a pass over whole rows.
Larger tensors on a CPU take the per-run passes, which move fewer bytes
(:func:`whole_tensor_passes`).

Where P V goes in the backward:

* packed (B, T, 3, H, Dh) ``qkv`` given (tokengeo's attention), CPU: into the v slot of
  qkv's gradient, which the kernel reads before dv is written over it; no buffer beyond
  the gradient itself. CUDA: into a buffer of its own, freed before qkv's gradient is
  allocated (the CUDA kernels need ``out`` in their own layout). torch's kernels take no
  ``out=`` and return dq, dk, dv as three new tensors, as in standard attention's
  backward, whose ``unbind`` then stacks them into qkv's gradient: the same peak.
* otherwise, CPU: into z's own buffer, restored exactly after
  (:mod:`tokengeo.nn.kernels.pv_roundtrip`);
* otherwise, CUDA: into one new buffer, one pass, no host sync.

The kernel is linear in its ``grad_out`` and independent per head: it is called with
``dz`` itself and its results are scaled by ``b_h`` afterwards (calling it with ``b ∘ dz``
would need a full copy of ``dz``); then ``dV += a ∘ dz``, ``da_h = Σ dz_h·V_h``,
``db_h = Σ dz_h·(P V)_h``. With the packed ``qkv`` that scaling is written straight into
qkv's gradient (the copy ``unbind``'s backward would make anyway).
"""

from __future__ import annotations

import functools

import torch

from tokengeo.nn.heads import ATTENTION, KIND_COEFFICIENTS, LAPLACIAN, MIXED, HeadRuns
from tokengeo.nn.kernels.compose import compose
from tokengeo.nn.kernels.pv_roundtrip import with_pv_in_z
from tokengeo.nn.kernels.sdpa_ops import sdpa_backward, sdpa_forward

__all__ = ["ROUTES", "LaplacianSDPA", "backward_route", "coefficients_for", "heads_of", "pv_into",
           "whole_tensor_passes"]

ROUTES = ("double", "packed_device", "packed_host", "host", "device")
"""The backward's routes (:func:`backward_route` says which runs)."""


def backward_route(*, create_graph: bool, packed: bool, device: bool) -> str:
    """The route :meth:`LaplacianSDPA.backward` takes, one of :data:`ROUTES`:

    * ``double``: ``create_graph=True`` (a double backward): the composition is recomputed
      with the math SDPA kernel and differentiated (:func:`_differentiable_backward`);
    * ``packed_device``: a packed qkv on the device path (CUDA, or ``device_path`` forced):
      P V in a buffer of its own, freed before qkv's gradient is allocated
      (:func:`_packed_device_backward`);
    * ``packed_host``: a packed qkv on a CPU: P V written into the v slot of qkv's
      gradient, which the kernel reads before dv is written over it;
    * ``host``: separate q, k, v on a CPU: P V written into z's own buffer and z restored
      exactly after (:func:`~tokengeo.nn.kernels.pv_roundtrip.with_pv_in_z`);
    * ``device``: separate q, k, v on the device path: P V into one new buffer, one pass,
      no value read back to the host.

    ``device``: the device (CUDA) path, i.e. z is on CUDA or the plan forces that path
    (``plan_kernel(..., device_path=True)``: its Python run on a CPU by the tests and the
    host benchmark).
    """
    if create_graph:
        return "double"
    if packed:
        return "packed_device" if device else "packed_host"
    return "device" if device else "host"


def coefficients_for(coef_a, coef_b, dtype, used: bool):
    """(a, b) in the compute dtype where the arithmetic reads them (``used``) or they learn;
    otherwise as given (two casts less per call: the fixed kinds' values are implied)."""
    if used or coef_a.requires_grad or coef_b.requires_grad:
        return coef_a.to(dtype), coef_b.to(dtype)
    return coef_a, coef_b


def _heads(t: torch.Tensor, h0: int, h1: int, dim: int = 2) -> torch.Tensor:
    """Heads h0:h1 of ``t`` along ``dim``: ``t`` itself when that is all of them (one
    slicing op less per tensor per call, which small models notice)."""
    if h0 == 0 and h1 == t.shape[dim]:
        return t
    return t.narrow(dim, h0, h1 - h0)


# Tensors up to this size take whole-tensor passes on a CPU: about a core's cache, where a
# pass costs its loop overhead per row more than its bytes (docs/kernels.md).
WHOLE_PASS_BYTES = 1 << 20


def whole_tensor_passes(runs: HeadRuns, t: torch.Tensor, device: bool) -> bool:
    """Whether the kernels take whole-tensor passes for ``t`` (B, ·, ·, Dh): heads of several
    fixed kinds, on the device path (``device``: each pass a launch) or, on a CPU, for
    tensors of at most :data:`WHOLE_PASS_BYTES`. Each pass reads the coefficients as (H, Dh) rows
    (:func:`coefficient_rows`), so its inner loop runs over whole (H·Dh) token rows; a pass
    over a slice of heads loops over (token, slice) rows of h·Dh elements, which at cache-sized
    tensors costs more than its bytes, while larger tensors are bound by the bytes, which
    the per-run passes halve (docs/kernels.md, "Whole-tensor passes")."""
    return len(runs.runs) > 1 and not runs.mixed and (
        device or t.numel() * t.element_size() <= WHOLE_PASS_BYTES)


def coefficient_rows(runs: HeadRuns, head_dim: int, like: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) of heads of fixed kinds as (H, Dh) rows (head h's coefficient repeated over its
    Dh values), in ``like``'s dtype and device: built once per signature (the kinds imply
    the values)."""
    return _rows(runs, head_dim, like.dtype, like.device)


@functools.lru_cache(maxsize=256)
def _rows(runs: HeadRuns, head_dim: int, dtype: torch.dtype, device: torch.device):
    with torch.inference_mode(False), torch.no_grad():
        ab = torch.tensor([KIND_COEFFICIENTS[kind] for h0, h1, kind in runs.runs
                           for _ in range(h0, h1)], dtype=dtype)  # (H, 2)
        rows = ab.to(device).T.unsqueeze(-1).expand(2, -1, head_dim).contiguous()
    return rows[0], rows[1]  # (H, Dh) each


def _combine_in_place(z, v, a, b, runs: HeadRuns, device: bool) -> None:
    """z ← a V + b z head-wise, z holding P V: (B, T, H, Dh) each, no full temporary."""
    # The mixed branch below over all heads, written out: the loop's slicing costs more
    # host time per call (docs/kernels.md, "Whole-tensor passes").
    if whole_tensor_passes(runs, z, device):  # z ← b z + a V, two passes: exact, fixed kinds
        ar, br = coefficient_rows(runs, z.shape[-1], z)  # (H, Dh)
        z.mul_(br).addcmul_(ar, v)
        return
    for h0, h1, kind in runs.runs:
        zr, vr = _heads(z, h0, h1), _heads(v, h0, h1)  # (B, T, h, Dh)
        if kind == LAPLACIAN:
            torch.sub(vr, zr, out=zr)
        elif kind == MIXED:
            zr.mul_(b[h0:h1].view(1, 1, -1, 1)).addcmul_(a[h0:h1].view(1, 1, -1, 1), vr)


def pv_into(dst, z, v, pv_mixed, runs: HeadRuns, device: bool) -> None:
    """dst ← P V head-wise from z, V and the saved mixed heads; all (B, T, ·, Dh).
    Mixed heads copy their saved P V; heads of fixed kinds need no coefficients (their
    kinds imply them); ``device``: the device path (:func:`whole_tensor_passes`)."""
    if whole_tensor_passes(runs, z, device):  # P V = b (z − a V): exact, b = ±1 and a ∈ {0, 1}
        ar, br = coefficient_rows(runs, z.shape[-1], z)  # (H, Dh)
        torch.addcmul(z, ar, v, value=-1, out=dst).mul_(br)
        return
    for h0, h1, kind in runs.runs:
        out = _heads(dst, h0, h1)
        if kind == ATTENTION:
            out.copy_(_heads(z, h0, h1))
        elif kind == LAPLACIAN:
            torch.sub(_heads(v, h0, h1), _heads(z, h0, h1), out=out)
        else:
            m0 = runs.mixed_position(h0)
            out.copy_(pv_mixed[:, :, m0:m0 + h1 - h0])


def _coef_grads(g, v, pv) -> tuple[torch.Tensor, torch.Tensor]:
    """da_h = Σ g_h·V_h, db_h = Σ g_h·P V_h over batch, tokens, dims; all (B, H, T, Dh)."""
    da = torch.stack([(g[i] * v[i]).sum((1, 2)) for i in range(g.shape[0])]).sum(0)
    db = torch.stack([(g[i] * pv[i]).sum((1, 2)) for i in range(g.shape[0])]).sum(0)
    return da, db


def _scale_grads(grads, g, a, b, runs: HeadRuns, device: bool, outs=None) -> None:
    """Head-wise dq, dk ← b dq, b dk and dv ← b dv + a g, all (B, H, T, Dh), into ``outs``.

    The SDPA backward is linear in grad_out and independent per head, so this turns its
    results ``grads`` = (dq, dk, dv) for grad_out = g into those for grad_out = b g, plus
    the identity part a g. ``outs`` (default: ``grads``, in place) may be views of another
    buffer (the packed qkv gradient): then attention heads are copied, and every element
    is read and written once either way.
    """
    outs = grads if outs is None else outs
    if whole_tensor_passes(runs, g, device):  # the mixed branch below, all heads, no slicing
        ar, br = coefficient_rows(runs, g.shape[-1], g)
        ah, bh = ar.unsqueeze(1), br.unsqueeze(1)  # (H, 1, Dh): rows of (B, H, T, Dh)
        torch.mul(grads[0], bh, out=outs[0])
        torch.mul(grads[1], bh, out=outs[1])
        torch.mul(grads[2], bh, out=outs[2]).addcmul_(ah, g)
        return
    for h0, h1, kind in runs.runs:
        sq, sk, sv = (_heads(t, h0, h1, 1) for t in grads)  # (B, h, T, Dh)
        oq, ok, ov = (_heads(t, h0, h1, 1) for t in outs)
        if kind == ATTENTION:
            if outs is not grads:
                for o, t in ((oq, sq), (ok, sk), (ov, sv)):
                    o.copy_(t)
        elif kind == LAPLACIAN:
            torch.neg(sq, out=oq)
            torch.neg(sk, out=ok)
            torch.sub(_heads(g, h0, h1, 1), sv, out=ov)
        else:
            bh, ah = b[h0:h1].view(1, -1, 1, 1), a[h0:h1].view(1, -1, 1, 1)
            torch.mul(sq, bh, out=oq)
            torch.mul(sk, bh, out=ok)
            torch.mul(sv, bh, out=ov).addcmul_(ah, _heads(g, h0, h1, 1))


def heads_of(qkv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, T, Dh) views of a packed (B, T, 3, H, Dh) tensor."""
    return tuple(x.transpose(1, 2) for x in qkv.unbind(2))


class LaplacianSDPA(torch.autograd.Function):
    """z = a V + b SDPA(q, k, v), saving q, k, v, z, the log-sum-exp and mixed heads' P V."""

    @staticmethod
    def forward(ctx, q, k, v, a, b, attn_mask, qkv, opts):
        # qkv (B, T, 3, H, Dh) or None: when given, q, k, v are its (detached) views and
        # the gradient goes to it. opts = (is_causal, scale, runs, backend, device_path): one
        # argument, since Function.apply inspects every argument at every call.
        is_causal, scale, runs, backend, device_path = opts
        out, saved, extra = sdpa_forward(backend, q, k, v, attn_mask, is_causal, scale)
        z = out.transpose(1, 2)  # (B, T, H, Dh): contiguous for the CPU kernel
        if not z.is_contiguous():
            z = z.contiguous()
        vt = v.transpose(1, 2)  # (B, T, H, Dh)
        pv_mixed = None
        if runs.mixed:  # (B, T, n_mixed, Dh): P V of the mixed heads, before combining
            pv_mixed = torch.cat([z[:, :, h0:h1] for h0, h1 in runs.mixed], dim=2)
        device = device_path or z.is_cuda
        _combine_in_place(z, vt, a, b, runs, device)
        if z._is_view():  # a view of ``out`` made here: an in-place edit of it would be
            z = z.detach()  # refused by autograd; the same memory, no copy, no view
        ctx.save_for_backward(q, k, v, z, a, b, attn_mask, pv_mixed, qkv, *saved)
        ctx.is_causal, ctx.scale, ctx.runs, ctx.backend = is_causal, scale, runs, backend
        ctx.device = device
        ctx.extra = extra  # the kernel's ints (max_q, max_k) and undefined tensors
        return z

    @staticmethod
    def backward(ctx, dz):
        q, k, v, z, a, b, attn_mask, pv_mixed, qkv, *saved = ctx.saved_tensors
        route = backward_route(create_graph=torch.is_grad_enabled(), packed=qkv is not None,
                               device=ctx.device)
        if route == "double":
            return _differentiable_backward(ctx, dz, q, k, v, a, b, attn_mask, qkv)
        if z.is_cuda and not dz.is_contiguous():
            dz = dz.contiguous()  # the CUDA kernels want grad_out laid out as their output
        g = dz.transpose(1, 2)  # (B, H, T, Dh)
        coefs = ctx.needs_input_grad[3] or ctx.needs_input_grad[4]
        runs, device = ctx.runs, ctx.device

        def use(pv):  # P V (B, H, T, Dh) -> da, db and SDPA's (dq, dk, dv) for grad_out g
            da, db = _coef_grads(g, v, pv) if coefs else (None, None)
            return da, db, sdpa_backward(ctx.backend, g, q, k, v, pv, saved, ctx.extra,
                                         attn_mask, ctx.is_causal, ctx.scale)

        if route == "packed_device":
            return _packed_device_backward(ctx, g, z, v, a, b, pv_mixed, qkv, use)
        if route == "packed_host":  # P V goes into the v slot of qkv's gradient, then dv
            dqkv = torch.empty_like(qkv)  # (B, T, 3, H, Dh)
            outs = heads_of(dqkv)  # (B, H, T, Dh) views
            pv_into(dqkv.select(2, 2), z, v.transpose(1, 2), pv_mixed, runs, device)
            da, db, grads = use(outs[2])
            _scale_grads(grads, g, a, b, runs, device, outs=outs)
            return None, None, None, da, db, None, dqkv, None
        if route == "host":
            da, db, grads = with_pv_in_z(z, v, pv_mixed, runs, use)
        else:  # "device": one pass into a new buffer, no host read per block on a GPU
            pv = torch.empty_like(z)  # (B, T, H, Dh)
            pv_into(pv, z, v.transpose(1, 2), pv_mixed, runs, device)
            da, db, grads = use(pv.transpose(1, 2))
            del pv
        _scale_grads(grads, g, a, b, runs, device)
        return *grads, da, db, None, None, None


def _packed_device_backward(ctx, g, z, v, a, b, pv_mixed, qkv, use):
    """The packed backward on the device path: P V in a buffer of its own, freed before
    qkv's gradient is allocated, so the peak is standard attention's (dq, dk, dv plus qkv's
    gradient).

    The CUDA kernels need ``out`` laid out as their forward wrote it: the memory-efficient
    and cuDNN backwards return NaN in bf16 for a strided view into qkv's gradient, and
    flash copies it (measured on an H200, torch 2.11).
    """
    pv = torch.empty_like(z)  # (B, T, H, Dh), the forward output's layout
    pv_into(pv, z, v.transpose(1, 2), pv_mixed, ctx.runs, ctx.device)
    da, db, grads = use(pv.transpose(1, 2))
    del pv
    dqkv = torch.empty_like(qkv)  # (B, T, 3, H, Dh)
    _scale_grads(grads, g, a, b, ctx.runs, ctx.device, outs=heads_of(dqkv))
    return None, None, None, da, db, None, dqkv, None


def _differentiable_backward(ctx, dz, q, k, v, a, b, attn_mask, qkv):
    """Backward for ``create_graph=True``: differentiate the recomputed composition."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    inputs = [q, k, v, a, b, None, qkv, None]
    wanted = [i for i, need in enumerate(ctx.needs_input_grad) if need]
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        if qkv is not None:
            q, k, v = heads_of(qkv)
        z = compose(q, k, v, a, b, attn_mask, ctx.is_causal, 0.0, ctx.scale, ctx.runs)
        grads = torch.autograd.grad(z, [inputs[i] for i in wanted], dz, create_graph=True)
    out = [None] * 8
    for i, g in zip(wanted, grads, strict=True):
        out[i] = g
    return tuple(out)
