"""The fused SDPA kernels' forward and backward, called one by one: the only module that
touches torch's private ``aten._scaled_dot_product_*`` ops.

Softmax attention ``out = softmax(q kᵀ·scale + mask) v`` (Vaswani et al. 2017, Eq. 1) is
computed by one of torch's fused kernels; its backward needs ``out`` and the row-wise
log-sum-exp of the scores (``lse``), plus kernel-specific extras (random-number state,
sequence-length bookkeeping). :func:`sdpa_forward` returns them split in two: tensors (to
``save_for_backward``) and plain values such as the flash kernels' ``max_q``/``max_k``
(ints, kept on ``ctx``: ``save_for_backward`` accepts tensors only).

Backends (``torch._fused_sdp_choice`` codes): CPU runs its flash kernel; CUDA runs flash
(fp16/bf16), memory-efficient (any float dtype) or cuDNN (what torch picks for bf16/fp16 on
Hopper). :func:`choose_backend` takes torch's own choice where it is one of these, and
otherwise asks ``torch.backends.cuda.can_use_flash_attention`` /
``can_use_efficient_attention`` for a kernel that can run. Signatures were read from
torch 2.11 and 2.13 (identical for these ops); :func:`check_schemas` refuses any other
with one message.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import torch


class Backend(enum.IntEnum):
    """``torch._fused_sdp_choice`` codes (torch.nn.attention.SDPBackend values)."""

    MATH = 0
    FLASH = 1
    EFFICIENT = 2
    CUDNN = 3


# (op, argument names, number of results) this module calls them with.
_SCHEMAS = {
    "flash_attention_for_cpu": (
        ("query", "key", "value", "dropout_p", "is_causal", "attn_mask", "scale"), 2),
    "flash_attention_for_cpu_backward": (
        ("grad_out", "query", "key", "value", "out", "logsumexp", "dropout_p", "is_causal",
         "attn_mask", "scale"), 3),
    "flash_attention": (
        ("query", "key", "value", "dropout_p", "is_causal", "return_debug_mask", "scale"), 9),
    "flash_attention_backward": (
        ("grad_out", "query", "key", "value", "out", "logsumexp", "cum_seq_q", "cum_seq_k",
         "max_q", "max_k", "dropout_p", "is_causal", "philox_seed", "philox_offset", "scale"),
        3),
    "efficient_attention": (
        ("query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p", "is_causal",
         "scale"), 4),
    "efficient_attention_backward": (
        ("grad_out_", "query", "key", "value", "attn_bias", "out", "logsumexp", "philox_seed",
         "philox_offset", "dropout_p", "grad_input_mask", "is_causal", "scale"), 4),
    "cudnn_attention": (
        ("query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p", "is_causal",
         "return_debug_mask", "scale"), 9),
    "cudnn_attention_backward": (
        ("grad_out", "query", "key", "value", "out", "logsumexp", "philox_seed", "philox_offset",
         "attn_bias", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal",
         "scale"), 3),
}
_OPS: dict[str, Any] = {}  # name -> op, once its signature is checked


def _op(name: str) -> Any:
    """``aten._scaled_dot_product_<name>``, its signature checked on first use."""
    op = _OPS.get(name)
    if op is None:
        check_schemas((name,))
        op = _OPS[name] = getattr(torch.ops.aten, f"_scaled_dot_product_{name}").default
    return op


def check_schemas(names: Sequence[str] = tuple(_SCHEMAS)) -> None:
    """Raise one RuntimeError if an op's signature is not the one this module calls."""
    for name in names:
        expected_args, n_out = _SCHEMAS[name]
        schema = getattr(torch.ops.aten, f"_scaled_dot_product_{name}").default._schema
        args = tuple(a.name for a in schema.arguments)
        if args != expected_args or len(schema.returns) != n_out:
            raise RuntimeError(
                f"torch {torch.__version__}: aten._scaled_dot_product_{name} has the signature "
                f"{schema}, not the one tokengeo's Laplacian kernel was written for "
                f"({', '.join(expected_args)} -> {n_out} results); pass kernel='compose' to "
                "laplacian_attention (or use torch 2.11-2.13)")


def _sdpa_params(q, k, v, attn_mask, is_causal):
    params = torch.backends.cuda.SDPAParams
    try:
        return params(q, k, v, attn_mask, 0.0, is_causal, False)  # ..., enable_gqa
    except TypeError:  # a torch without the enable_gqa argument
        return params(q, k, v, attn_mask, 0.0, is_causal)


def choose_backend(q, k, v, attn_mask, is_causal: bool, scale: float | None) -> Backend | None:
    """The fused kernel the in_place kernel runs for these inputs, or None (composition).

    CPU: the flash kernel when torch would choose it. CUDA (no ``attn_mask``): torch's choice
    (flash, memory-efficient or cuDNN), else flash or memory-efficient where
    ``can_use_*_attention`` says they run. One dispatcher query per call; the attention
    modules call it once per input signature (see :mod:`tokengeo.nn.attention`).
    """
    if q.device.type not in ("cpu", "cuda"):
        return None
    if q.device.type == "cuda" and attn_mask is not None:
        return None
    try:
        choice = torch._fused_sdp_choice(q, k, v, attn_mask, 0.0, is_causal, scale=scale)
    except RuntimeError:  # no enabled backend can run these inputs (sdpa_kernel context)
        choice = Backend.MATH
    if q.device.type == "cpu":
        return Backend.FLASH if choice == Backend.FLASH else None
    if choice == Backend.CUDNN and q.dtype == torch.float32:  # cuDNN gives NaN in fp32
        choice = Backend.MATH
    if choice in (Backend.FLASH, Backend.EFFICIENT, Backend.CUDNN):
        return Backend(choice)
    params = _sdpa_params(q, k, v, attn_mask, is_causal)
    if torch.backends.cuda.can_use_flash_attention(params):
        return Backend.FLASH
    if torch.backends.cuda.can_use_efficient_attention(params):
        return Backend.EFFICIENT
    return None


def sdpa_forward(backend: Backend, q, k, v, attn_mask, is_causal: bool, scale: float | None):
    """``(out, saved, extra)``: SDPA's output (B, H, T, Dh), the tensors its backward needs
    (``saved``, for ``save_for_backward``) and its non-tensor values (``extra``, for ctx)."""
    if q.device.type == "cpu":
        _op("flash_attention_for_cpu_backward")  # a wrong backward signature fails now
        out, lse = _op("flash_attention_for_cpu")(
            q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)
        return out, (lse,), ()
    if backend == Backend.FLASH:
        _op("flash_attention_backward")  # a wrong backward signature fails now
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = _op("flash_attention")(
            q, k, v, 0.0, is_causal, False, scale=scale)
        return out, (lse, seed, offset), (cum_q, cum_k, max_q, max_k)
    if backend == Backend.CUDNN:
        _op("cudnn_attention_backward")  # a wrong backward signature fails now
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = _op("cudnn_attention")(
            q, k, v, None, True, 0.0, is_causal, False, scale=scale)
        return out, (lse, seed, offset), (cum_q, cum_k, max_q, max_k)
    _op("efficient_attention_backward")  # a wrong backward signature fails now
    out, lse, seed, offset = _op("efficient_attention")(
        q, k, v, None, True, 0.0, is_causal, scale=scale)
    return out, (lse, seed, offset), ()


def sdpa_backward(backend: Backend, g, q, k, v, out, saved, extra, attn_mask, is_causal: bool,
                  scale: float | None):
    """(dq, dk, dv), each (B, H, T, Dh), of SDPA for grad_out ``g`` (B, H, T, Dh).

    ``out`` is SDPA's output, P V (the caller may pass it rebuilt in another buffer);
    ``saved``/``extra`` are what :func:`sdpa_forward` returned. Non-dense tensors that
    :func:`sdpa_forward` left out (``cum_seq_q``/``cum_seq_k`` of dense inputs) are None,
    which the dispatcher passes on as undefined tensors.
    """
    if q.device.type == "cpu":
        return _op("flash_attention_for_cpu_backward")(
            g, q, k, v, out, saved[0], 0.0, is_causal, attn_mask=attn_mask, scale=scale)
    if backend == Backend.FLASH:
        lse, seed, offset = saved
        cum_q, cum_k, max_q, max_k = extra
        return _op("flash_attention_backward")(
            g, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, is_causal, seed, offset,
            scale=scale)
    if backend == Backend.CUDNN:
        lse, seed, offset = saved
        cum_q, cum_k, max_q, max_k = extra
        return _op("cudnn_attention_backward")(
            g, q, k, v, out, lse, seed, offset, None, cum_q, cum_k, max_q, max_k, 0.0, is_causal,
            scale=scale)
    lse, seed, offset = saved
    dq, dk, dv, _ = _op("efficient_attention_backward")(
        g, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False], is_causal,
        scale=scale)
    return dq, dk, dv
