"""The one door to the attention kernels: an ordered table, read top to bottom.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads): (a, b) = (0, 1) attention, (1, −1)
Laplacian, anything else a mixed head (:mod:`tokengeo.nn.heads`; the readable reference is
:func:`tokengeo.nn.reference.attention_reference`, which every entry is tested against).

:data:`TABLE` is the map. Each entry is a name, a function that says why it cannot run
these inputs (or None) and the function that runs it. ``kernel="auto"`` takes the first
entry that does not refuse; naming a kernel selects its entry, and an
entry that refuses raises one line saying why. tokengeo's attention modules plan once per
input signature (:class:`tokengeo.nn.attention.HeadAttention`), and a hooked pattern
is materialised there without a plan (the hook sees P, so no kernel of this table runs);
the Hugging Face swap
combines heads with :func:`~tokengeo.nn.kernels.compose.combine_runs` (HF's own attention
computes P V). Measured costs are in docs/kernels.md, with those of the kernels removed
for never winning a measurement (a fused Triton kernel, and ``recompute``).

=======================  ==================================================================
``sdpa``                 ``F.scaled_dot_product_attention`` alone: attention heads only.
                         Standard attention's time and memory. Default wherever no head
                         reads V.
``checkpointed_compose`` ``a V + b SDPA`` inside selective activation checkpointing with the
                         output projection (:mod:`~tokengeo.nn.kernels.checkpointed`): one
                         compiled graph that saves what standard attention saves, z
                         recomputed in the backward. Default while ``torch.compile``
                         traces a step that will be differentiated and no hook sees z.
``in_place``             fused SDPA with z written over its output, in an autograd
                         Function (:mod:`~tokengeo.nn.kernels.in_place`); saves what
                         standard attention saves, P V rebuilt from z in the backward. Costs
                         tens of µs of Python per call; breaks a compiled graph. Default in
                         eager mode on CPU and CUDA wherever a fused SDPA kernel runs (no
                         dropout, no mask that requires grad, one (H,) coefficient pair per
                         head, no hook on z). ``plan_kernel(..., device_path=True)``: its
                         CUDA backward route on any device (tests, the host benchmark).
``compose``              ``a V + b SDPA`` in plain autograd (:mod:`~tokengeo.nn.kernels.compose`):
                         runs everything (any mask, dropout, device, per-slice
                         coefficients, hooks on z); keeps P V and z (one (B, T, d) tensor
                         more). Default where nothing above runs.
=======================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tokengeo.errors import ConfigError
from tokengeo.nn.heads import HeadRuns
from tokengeo.nn.kernels.checkpointed import compiling
from tokengeo.nn.kernels.compose import compose
from tokengeo.nn.kernels.in_place import LaplacianSDPA, coefficients_for
from tokengeo.nn.kernels.sdpa_ops import Backend, choose_backend

__all__ = ["KERNELS", "TABLE", "Call", "Kernel", "Plan", "autocast_inputs",
           "check_kernel_name", "plan_kernel"]


@dataclass(frozen=True, kw_only=True)
class Call:
    """What planning sees of one call: q, k, v (B, H, T, Dh) in the compute dtype, the
    heads' ``runs`` and SDPA's arguments; ``packed``: the gradient may go to the packed qkv
    they are views of; ``coef_grad``: the coefficients learn; ``per_slice``: coefficients
    shaped (p, H); ``hooked``: a hook sees z and a backward follows."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    runs: HeadRuns
    attn_mask: torch.Tensor | None = None
    is_causal: bool = False
    dropout_p: float = 0.0
    scale: float | None = None
    packed: bool = False
    coef_grad: bool = False
    per_slice: bool = False
    hooked: bool = False


@dataclass(frozen=True)
class Kernel:
    """One entry of :data:`TABLE`: ``refusal(call)`` says why it cannot run (None when it
    can); ``run(plan, q, k, v, a, b, *, attn_mask, is_causal, dropout_p, scale, qkv)``
    gives z (B, T, H, Dh). ``backend(call)``: the fused SDPA kernel it fixes at planning
    time; ``checkpoints``: the caller wraps the attention and its output projection in
    :func:`~tokengeo.nn.kernels.checkpointed.keep_only_attention`; ``takes_qkv``: it can
    write the gradient straight into a packed qkv."""

    name: str
    refusal: Callable[[Call], str | None]
    run: Callable[..., torch.Tensor]
    backend: Callable[[Call], Backend | None] | None = None
    checkpoints: bool = False
    takes_qkv: bool = False


@dataclass(frozen=True)
class Plan:
    """A chosen entry and what it fixed: the heads' ``runs``, the fused ``backend``,
    ``packed`` (the gradient goes to qkv) and ``device_path`` (the ``in_place`` backward
    takes its CUDA route on any device: :func:`~tokengeo.nn.kernels.in_place.backward_route`)."""

    kernel: Kernel
    runs: HeadRuns
    backend: Backend | None = None
    packed: bool = False
    device_path: bool = False

    def run(self, q, k, v, a, b, *, attn_mask=None, is_causal=False, dropout_p=0.0,
            scale=None, qkv=None):
        """z (B, T, H, Dh) of inputs already checked and cast (:func:`autocast_inputs`);
        ``qkv`` is read only when the plan is ``packed``."""
        return self.kernel.run(self, q, k, v, a, b, attn_mask=attn_mask, is_causal=is_causal,
                               dropout_p=dropout_p, scale=scale, qkv=qkv)


# --------------------------------------------------------------------------- refusals


def _sdpa_refusal(call: Call) -> str | None:
    if call.runs.uses_values:
        return "some head reads V (Laplacian, mixed or fixed heads)"
    if call.coef_grad:
        return "the coefficients require grad"
    return None


def _checkpointed_refusal(call: Call) -> str | None:
    if not compiling():
        return ("torch.compile is not tracing (in eager mode checkpointing would rerun the "
                "projection)")
    if not torch.is_grad_enabled():
        return "no backward follows (grad is disabled)"
    if call.hooked:
        return "a hook sees z, which the checkpointing would drop"
    return None


def _in_place_refusal(call: Call) -> str | None:
    """Why the fused in-place kernel cannot take these inputs (None when it can)."""
    mask = call.attn_mask
    if compiling():
        return "torch.compile is tracing (this kernel breaks the graph)"
    if call.dropout_p > 0:
        return "dropout_p > 0 (the fused kernel's dropout mask cannot be replayed)"
    if mask is not None and mask.requires_grad:
        return "attn_mask requires grad"
    if mask is not None and not (mask.dtype == torch.bool or mask.is_floating_point()):
        return f"attn_mask of dtype {mask.dtype} (neither bool nor floating)"
    if call.per_slice:
        return "per-slice coefficients (p, H) (one (a, b) per head is needed)"
    if call.hooked:
        return "a hook sees z, which this kernel saves for its backward"
    if call.q.device.type not in ("cpu", "cuda"):
        return f"device {call.q.device.type} (the fused kernels run on cpu and cuda)"
    if _in_place_backend(call) is None:
        q = call.q
        return (f"no fused SDPA kernel for these inputs on {q.device.type} ({q.dtype}, mask "
                f"{'given' if mask is not None else 'none'})")
    return None


def _in_place_backend(call: Call) -> Backend | None:
    return choose_backend(call.q, call.k, call.v, call.attn_mask, call.is_causal, call.scale)


# --------------------------------------------------------------------------- runs


def _run_sdpa(plan, q, k, v, a, b, *, attn_mask, is_causal, dropout_p, scale, qkv):
    return F.scaled_dot_product_attention(  # (B, H, T, Dh) -> (B, T, H, Dh)
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale).transpose(1, 2)


def _run_compose(plan, q, k, v, a, b, *, attn_mask, is_causal, dropout_p, scale, qkv):
    return compose(q, k, v, a.to(q.dtype), b.to(q.dtype), attn_mask, is_causal, dropout_p,
                   scale, plan.runs)


def _run_in_place(plan, q, k, v, a, b, *, attn_mask, is_causal, dropout_p, scale, qkv):
    runs = plan.runs
    # read by mixed heads, and by the double backward's composition when kinds are several
    a, b = coefficients_for(a, b, q.dtype, len(runs.runs) > 1 or bool(runs.mixed))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
            ~attn_mask, float("-inf"))  # the additive mask SDPA builds too
    if plan.packed:
        q, k, v = q.detach(), k.detach(), v.detach()  # their gradient goes to qkv
    else:
        qkv = None
    return LaplacianSDPA.apply(q, k, v, a, b, attn_mask, qkv,
                               (is_causal, scale, runs, plan.backend, plan.device_path))


# --------------------------------------------------------------------------- the table

TABLE: tuple[Kernel, ...] = (
    Kernel("sdpa", _sdpa_refusal, _run_sdpa),
    Kernel("checkpointed_compose", _checkpointed_refusal, _run_compose, checkpoints=True),
    Kernel("in_place", _in_place_refusal, _run_in_place, backend=_in_place_backend,
           takes_qkv=True),
    Kernel("compose", lambda call: None, _run_compose),
)
"""The kernels in the order ``auto`` tries them; the module docstring is their map."""

_BY_NAME = {kernel.name: kernel for kernel in TABLE}
KERNELS: tuple[str, ...] = ("auto", *_BY_NAME)
"""Every name ``kernel=`` accepts."""


def check_kernel_name(name: object) -> None:
    """Raise one ConfigError unless ``name`` is in :data:`KERNELS`."""
    if not isinstance(name, str) or name not in KERNELS:
        raise ConfigError(f"kernel={name!r} is not valid; choose one of {list(KERNELS)}")


def plan_kernel(call: Call, kernel: str = "auto", *, device_path: bool = False) -> Plan:
    """The :class:`Plan` for ``call``: the first entry of :data:`TABLE` that does not
    refuse (``auto``), or the named entry, which raises a :class:`ConfigError` saying why
    when it refuses. ``device_path``: the ``in_place`` backward takes its CUDA route on any
    device (what the tests and the host benchmark run on a CPU)."""
    if kernel == "auto":
        chosen = next(k for k in TABLE if k.refusal(call) is None)
    else:
        check_kernel_name(kernel)
        chosen = _BY_NAME[kernel]
        why = chosen.refusal(call)
        if why is not None:
            raise ConfigError(f"kernel={kernel!r} cannot run: {why}; use kernel='auto'")
    backend = chosen.backend(call) if chosen.backend is not None else None
    return Plan(chosen, call.runs, backend, call.packed and chosen.takes_qkv, device_path)


def autocast_inputs(q, k, v, attn_mask):
    """Cast as autocast casts ``F.scaled_dot_product_attention`` (lower-precision list)."""
    dev = q.device.type
    if not torch.is_autocast_enabled(dev):
        return q, k, v, attn_mask
    dtype = torch.get_autocast_dtype(dev)
    q, k, v = (t.to(dtype) if t.is_floating_point() else t for t in (q, k, v))
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.to(dtype)
    return q, k, v, attn_mask
