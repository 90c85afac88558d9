"""The fused Triton kernel vs torch's standard SDPA: forward + backward time and peak memory.

Claim (Zhang & Papyan, arXiv 2602.09297): a Laplacian head costs what an attention head
costs. For each dtype and T (B = 8, H = 12, Dh = 64, causal), the medians of CUDA-event
timings of forward + backward and the peak of ``torch.cuda.max_memory_allocated`` above the
inputs, for: ``standard`` (``F.scaled_dot_product_attention`` on heads-first views, output
back to (B, T, H·Dh), as a model's attention does), and the kernel with all heads
attention, all Laplacian, half Laplacian, and mixed (learnable a, b); ratios kernel /
standard. CUDA only. Usage::

    tokengeo bench laplacian_triton      (or python benchmarks/laplacian_triton.py
                                          [--sizes 1024 4096] [--dtypes bfloat16] [--sweep])

``--sweep``: instead, the all-Laplacian op under a few tilings (bf16, T = 4096).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from tokengeo.bench.measure import cuda_median_ms
from tokengeo.errors import ConfigError

SIZES = (1024, 4096, 8192)
DTYPES = ("bfloat16", "float32")
B, H, DH = 8, 12, 64


@dataclass
class TritonBenchConfig:
    """Sequence lengths and dtypes measured; ``sweep``: time tilings instead."""

    sizes: tuple[int, ...] = SIZES
    dtypes: tuple[str, ...] = field(default=DTYPES, metadata={
        "choices": ("bfloat16", "float16", "float32")})
    repeats: int = 20
    warmup: int = 3
    sweep: bool = False


def _standard(q, k, v):
    """(B, T, H, Dh) inputs -> (B, T, H·Dh): SDPA on heads-first views, as models call it."""
    Bq, T = q.shape[:2]
    pv = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
    return pv.transpose(1, 2).reshape(Bq, T, -1)


def _kernel_op(coef_a, coef_b):
    from tokengeo.nn.kernels.triton import laplacian_attention_triton

    def op(q, k, v):
        Bq, T = q.shape[:2]
        z = laplacian_attention_triton(*(t.transpose(1, 2) for t in (q, k, v)), coef_a, coef_b,
                                       is_causal=True)  # (B, T, H, Dh)
        return z.reshape(Bq, T, -1)

    return op


def _ops(device) -> dict:
    ones, zeros = torch.ones(H, device=device), torch.zeros(H, device=device)
    half = torch.arange(H, device=device) >= H // 2  # the last H/2 heads Laplacian
    mixed_a = torch.rand(H, device=device, generator=torch.Generator(device).manual_seed(1))
    return {
        "standard": _standard,
        "attention": _kernel_op(zeros, ones),
        "laplacian": _kernel_op(ones, -ones),
        "half_laplacian": _kernel_op(half.float(), 1 - 2 * half.float()),
        "mixed": _kernel_op(mixed_a.requires_grad_(), (1 - mixed_a).detach().requires_grad_()),
    }


def _measure(op, q, k, v, grad, repeats: int, warmup: int) -> tuple[float, int]:
    """(median fwd+bwd milliseconds, peak bytes above what was allocated before)."""

    def step():
        out = op(q, k, v)
        out.backward(grad)
        q.grad = k.grad = v.grad = None

    ms = cuda_median_ms(step, repeats, warmup)
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return ms, torch.cuda.max_memory_allocated() - base


def run(cfg: TritonBenchConfig) -> dict:
    """The benchmark as a dict (see the module docstring); needs a CUDA device."""
    if not torch.cuda.is_available():
        raise ConfigError("the laplacian_triton benchmark needs a CUDA device; none is present")
    if cfg.sweep:
        return {"sweep": sweep(repeats=cfg.repeats)}
    sizes, dtypes, repeats, warmup = cfg.sizes, cfg.dtypes, cfg.repeats, cfg.warmup
    device = torch.device("cuda")
    gen = torch.Generator(device).manual_seed(0)
    cases = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for T in sizes:
            q, k, v = (torch.randn(B, T, H, DH, device=device, dtype=dtype, generator=gen)
                       .requires_grad_() for _ in range(3))
            grad = torch.randn(B, T, H * DH, device=device, dtype=dtype, generator=gen)
            case = {"dtype": dtype_name, "T": T, "ms": {}, "peak_bytes": {}}
            for name, op in _ops(device).items():
                ms, peak = _measure(op, q, k, v, grad, repeats, warmup)
                case["ms"][name], case["peak_bytes"][name] = ms, peak
            std_ms, std_peak = case["ms"]["standard"], case["peak_bytes"]["standard"]
            case["time_ratio"] = {n: t / std_ms for n, t in case["ms"].items() if n != "standard"}
            case["memory_ratio"] = {n: m / std_peak for n, m in case["peak_bytes"].items()
                                    if n != "standard"}
            cases.append(case)
            del q, k, v, grad
            torch.cuda.empty_cache()
    return {
        "sizes": {"B": B, "H": H, "Dh": DH, "causal": True,
                  "timing": "median of CUDA-event fwd+bwd",
                  "memory": "max_memory_allocated above the inputs, one fwd+bwd"},
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "cases": cases,
    }


# Tilings tried by --sweep (bfloat16, Dh = 64): the default, then one change at a time
# (all compile for sm_90a without spills except where noted in tile_config's docstring).
SWEEP = {
    "default": None,
    "fwd 128x128": dict(fwd_n=128),
    "fwd 64x64 w4": dict(fwd_m=64, fwd_warps=4),
    "dq 128x32": dict(dq_n=32),
    "dkdv 32x64 w4": dict(dkdv_n=64, dkdv_warps=4),
    "stages 3": dict(stages=3),
    "stages 2": dict(stages=2),
}


def sweep(T: int = 4096, dtype: str = "bfloat16", repeats: int = 20) -> dict:
    """Median fwd+bwd ms of the all-Laplacian op under each tiling of SWEEP (and standard)."""
    from dataclasses import replace

    from tokengeo.nn.kernels import triton as lt

    device = torch.device("cuda")
    q, k, v = (torch.randn(B, T, H, DH, device=device, dtype=getattr(torch, dtype))
               .requires_grad_() for _ in range(3))
    grad = torch.randn(B, T, H * DH, device=device, dtype=q.dtype)
    ops = _ops(device)
    out = {"T": T, "dtype": dtype, "standard_ms": _measure(ops["standard"], q, k, v, grad,
                                                           repeats, 3)[0], "laplacian_ms": {}}
    default = lt.tile_config(q.dtype, DH)
    try:
        for name, change in SWEEP.items():
            lt.TILE_OVERRIDE = replace(default, **(change or {}))
            try:
                ms = _measure(ops["laplacian"], q, k, v, grad, repeats, 3)[0]
            except Exception as exc:  # noqa: BLE001 - a tiling the GPU cannot run is a result
                ms = f"failed: {exc!r:.200}"
            out["laplacian_ms"][name] = ms
    finally:
        lt.TILE_OVERRIDE = None
    return out
