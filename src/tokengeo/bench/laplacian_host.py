"""The host's cost per call of each Laplacian kernel: what short sequences on a GPU pay.

Claim (Zhang & Papyan, arXiv 2602.09297; our promise): a Laplacian head costs what an
attention head costs. On a GPU at short sequences (bf16, T = 1024 on an H200) the
forward + backward of one attention layer is bound by the host, which issues the kernels:
there, the time ratio to standard attention is the ratio of host work per call. That work
is Python and the dispatcher, and it can be measured on a CPU: at sizes where arithmetic
is negligible (B = 1, H = 12, T = 8, Dh = 16, one thread), the median wall time of forward
+ backward is the host cost. The in_place kernel's device path is forced (``device_path=True``,
:func:`tokengeo.nn.kernels.backward_route`), so the Python that runs is the Python a GPU
runs.

The H200 run of 2026-12-04 (``docs/benchmarks/gpu_check_2026-12-04.json``, bf16,
T = 1024, all heads Laplacian, q, k, v unpacked) gave 1.11 (``V − SDPA``), 1.49 (compose)
and 2.26 (in_place, then called lean) over standard SDPA; this benchmark, on that code,
1.12, 1.54 and 2.00
(``docs/benchmarks/laplacian_host_2026-12-05.json``): the short-sequence GPU ratios are
host ratios.

Also the resident memory the forward keeps for the backward and the peak of forward +
backward (Linux; glibc's mmap threshold fixed so freed tensors leave the resident set) at
B = 8, T = 256, H = 12, Dh = 64, fp32, each as a ratio to standard SDPA's::

    tokengeo bench laplacian_host        (or python benchmarks/laplacian_host.py --calls 300)
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tokengeo.bench.measure import MMAP_ENV
from tokengeo.errors import ConfigError

KINDS = {"lap": ("laplacian",) * 12, "half": ("attention",) * 6 + ("laplacian",) * 6}
KERNELS = ("in_place", "compose")


@dataclass
class HostBenchConfig:
    """``repeats`` interleaved rounds of ``calls`` forward + backward calls per op."""

    repeats: int = 7
    calls: int = 300

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.calls < 1:
            raise ConfigError(f"repeats={self.repeats} and calls={self.calls} must be at "
                              "least 1")


def _case(B: int, H: int, T: int, Dh: int):
    """qkv (B, T, 3, H, Dh) requiring grad, a gradient for z (B, T, H, Dh), and the
    heads-first views of qkv."""
    gen = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3, H, Dh, generator=gen).requires_grad_()
    grad = torch.randn(B, T, H, Dh, generator=gen)

    def heads():
        return tuple(t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh)
    return qkv, grad, heads


def _ops(qkv, heads) -> dict[str, Callable[[], torch.Tensor]]:
    """name -> forward returning z (B, T, H, Dh): standard SDPA, V − SDPA, and each kernel
    on each head layout: called per call (``fn``), with the packed qkv (``packed``), and
    through a plan made once, as an attention module runs it (``planned``)."""
    from tokengeo.nn.kernels import Call, head_runs, laplacian_attention, plan_kernel

    def standard():
        return F.scaled_dot_product_attention(*heads(), is_causal=True).transpose(1, 2)

    def v_minus_sdpa():
        q, k, v = heads()
        return (v - F.scaled_dot_product_attention(q, k, v, is_causal=True)).transpose(1, 2)

    ops = {"standard": standard, "v_minus_sdpa": v_minus_sdpa}
    for name, kinds in KINDS.items():
        a = torch.tensor([0.0 if k == "attention" else 1.0 for k in kinds])
        b = 1.0 - 2.0 * a
        for kernel in KERNELS:
            def call(kinds=kinds, a=a, b=b, kernel=kernel, packed=False):
                return laplacian_attention(*heads(), a, b, is_causal=True, head_kinds=kinds,
                                           kernel=kernel, qkv=qkv if packed else None,
                                           device_path=True)
            q, k, v = heads()
            plan = plan_kernel(Call(q=q, k=k, v=v, runs=head_runs(a, b, kinds),
                                    is_causal=True, packed=True), kernel, device_path=True)

            def planned(plan=plan, a=a, b=b):
                return plan.run(*heads(), a, b, is_causal=True, qkv=qkv)
            ops[f"{kernel}[{name}]"] = call
            ops[f"{kernel} packed[{name}]"] = lambda call=call: call(packed=True)
            ops[f"{kernel} planned[{name}]"] = planned
    return ops


def host_us(repeats: int = 7, calls: int = 300) -> dict:
    """Median microseconds per forward + backward at tiny sizes, interleaved by repeat."""
    qkv, grad, heads = _case(1, 12, 8, 16)
    ops = _ops(qkv, heads)
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(repeats):
        for name, op in ops.items():
            start = time.perf_counter()
            for _ in range(calls):
                qkv.grad = None
                op().backward(grad)
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    us = {name: statistics.median(s) for name, s in samples.items()}
    return {"us": us, "ratio": {n: t / us["standard"] for n, t in us.items()},
            "extra_us": {n: t - us["standard"] for n, t in us.items()}}


def memory() -> dict:
    """Resident bytes each op's forward keeps for its backward (z alive), and the peak of
    forward + backward; each as a ratio to standard SDPA's."""
    from tokengeo.bench.measure import peak_rss_bytes, status_bytes

    qkv, grad, heads = _case(8, 12, 256, 64)
    ops = {n: op for n, op in _ops(qkv, heads).items() if "planned" in n or "[" not in n}

    def step(op):
        qkv.grad = None
        op().backward(grad)

    def kept(op) -> int:
        qkv.grad = None
        base = status_bytes("VmRSS")
        z = op()
        held = status_bytes("VmRSS") - base
        z.backward(grad)
        return held

    for op in ops.values():  # warm-up: allocator pools and kernels' own buffers
        step(op)
    keeps = {name: min(kept(op) for _ in range(3)) for name, op in ops.items()}
    peak = {name: min(peak_rss_bytes(lambda op=op: step(op)) for _ in range(3))
            for name, op in ops.items()}
    return {"kept_bytes": keeps, "kept_ratio": {n: b / keeps["standard"] for n, b in keeps.items()},
            "peak_bytes": peak, "peak_ratio": {n: p / peak["standard"] for n, p in peak.items()},
            "tensor_bytes": qkv.numel() // 3 * qkv.element_size()}


def run(cfg: HostBenchConfig) -> dict:
    """Host microseconds per call (one thread, the in_place kernel's device path) and the
    memory each forward keeps; ratios to standard SDPA."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        host = host_us(cfg.repeats, cfg.calls)  # the in_place kernel's CUDA path, here
        mem = memory() if os.environ.get(MMAP_ENV) else {
            "skipped": f"resident memory measures tensors only with {MMAP_ENV} set "
                       f"before the process starts (tokengeo bench sets it)"}
    finally:
        torch.set_num_threads(threads)
    return {
        "sizes": {"host": {"B": 1, "H": 12, "T": 8, "Dh": 16, "dtype": "float32",
                           "threads": 1, "timing": "median over repeats of mean us per fwd+bwd",
                           "in_place_path": "the device (CUDA) path, forced"},
                  "memory": {"B": 8, "H": 12, "T": 256, "Dh": 64, "dtype": "float32",
                             "measure": "RSS the forward keeps, and peak RSS of fwd+bwd "
                                        "(min of 3 each)"}},
        "host": host,
        "memory": mem,
    }
