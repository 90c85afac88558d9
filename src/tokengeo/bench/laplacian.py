"""Benchmark of Laplacian heads: operator cost, training-step cost and peak memory.

Claims: a fused Laplacian head (``V − SDPA(q, k, v)``) costs about the same as standard
SDPA and much less than materialising ``I − P``; a training step with Laplacian heads costs
within 3% of one without (Zhang & Papyan, arXiv 2602.09297: a Laplacian head adds no
parameters and, fused, no T×T matrix).

Sizes depend on the device (:data:`DEFAULTS`): CPU sizes on a CPU; on CUDA the sizes of a
GPU run (B = 8, H = 12, Dh = 64, T up to 8192, gpt-small and vit-small train steps under
bf16 autocast), where every kernel of the table is timed (:mod:`tokengeo.bench.laplacian_cuda`:
the one GPU operator benchmark). ``kernel`` picks the Laplacian kernel measured on a CPU
(a name in :data:`tokengeo.nn.kernels.KERNELS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tokengeo.bench.measure import allocate_for_timing, interleaved_medians, peak_bytes
from tokengeo.nn.kernels import check_kernel_name, laplacian_attention

# Sizes per device type; a field left at None takes these.
DEFAULTS = {
    "cpu": {"batch": 4, "n_heads": 4, "head_dim": 32, "seq_lens": (128, 512, 1024),
            "dtype": "float32", "models": ("gpt-tiny", "vit-tiny"), "train_batch": 16,
            "train_seq_len": 256, "precision": "fp32"},
    "cuda": {"batch": 8, "n_heads": 12, "head_dim": 64, "seq_lens": (1024, 4096, 8192),
             "dtype": "bfloat16", "models": ("gpt-small", "vit-small"), "train_batch": 32,
             "train_seq_len": 1024, "precision": "bf16"},
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LaplacianBenchConfig:
    """What to measure; ``None`` fields take the device's :data:`DEFAULTS`."""

    batch: int | None = None
    n_heads: int | None = None
    head_dim: int | None = None
    seq_lens: tuple[int, ...] | None = None
    dtype: str | None = None
    op_repeats: int = 15
    models: tuple[str, ...] | None = None
    train_batch: int | None = None
    train_seq_len: int | None = None
    precision: str | None = None
    train_repeats: int = 15
    device: str = "cpu"
    kernel: str = "auto"
    compile: bool = False  # train steps through torch.compile (tokengeo.nn.kernels.checkpointed)

    def __post_init__(self) -> None:
        check_kernel_name(self.kernel)
        defaults = DEFAULTS["cuda" if self.device.startswith("cuda") else "cpu"]
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)


# The operators take q, k, v in the (B, T, H, Dh) layout a qkv projection produces and
# return merged heads (B, T, H·Dh), the input of the output projection: what a model runs.


def _heads_first(*ts):
    return (t.transpose(1, 2) for t in ts)  # (B, H, T, Dh) views


def standard_op(q, k, v):
    B, T, H, Dh = q.shape
    pv = F.scaled_dot_product_attention(*_heads_first(q, k, v))  # (B, H, T, Dh)
    return pv.transpose(1, 2).reshape(B, T, H * Dh)


def fused_laplacian_op(q, k, v, kernel: str = "auto"):
    """(I − P) V through :func:`~tokengeo.nn.kernels.laplacian_attention` (what
    tokengeo's attention trains with): the fused kernel, standard attention's saved tensors."""
    B, T, H, Dh = q.shape
    ones = torch.ones(H, dtype=q.dtype, device=q.device)
    z = laplacian_attention(*_heads_first(q, k, v), ones, -ones, kernel=kernel,
                            head_kinds=("laplacian",) * H)  # (B, T, H, Dh)
    return z.reshape(B, T, H * Dh)


def composed_laplacian_op(q, k, v):
    """(I − P) V as V − SDPA(q, k, v) in plain autograd (keeps P V and V − P V)."""
    B, T, H, Dh = q.shape
    pv = F.scaled_dot_product_attention(*_heads_first(q, k, v))  # (B, H, T, Dh)
    return (v - pv.transpose(1, 2)).reshape(B, T, H * Dh)


def naive_laplacian_op(q, k, v):
    """(I − P) V with P = softmax(QKᵀ/√d) materialised and I − P built explicitly."""
    B, T, H, Dh = q.shape
    qh, kh, vh = _heads_first(q, k, v)
    p = (qh @ kh.transpose(-2, -1) / math.sqrt(Dh)).softmax(-1)  # (B, H, T, T)
    eye = torch.eye(T, dtype=q.dtype, device=q.device)
    return ((eye - p) @ vh).transpose(1, 2).reshape(B, T, H * Dh)


def _fwd_bwd(op, q, k, v, grad):
    def run():  # the gradients freed inside the call: a peak counts them, a baseline not
        op(q, k, v).backward(grad)
        q.grad = k.grad = v.grad = None

    return run


def _operator_fns(cfg: LaplacianBenchConfig, T: int) -> dict[str, Callable[[], None]]:
    """Forward + backward of each operator at sequence length T."""
    dev, dtype = torch.device(cfg.device), DTYPES[cfg.dtype]
    shape = (cfg.batch, T, cfg.n_heads, cfg.head_dim)
    q, k, v = (torch.randn(shape, device=dev, dtype=dtype, requires_grad=True)
               for _ in range(3))
    grad = torch.randn(cfg.batch, T, cfg.n_heads * cfg.head_dim, device=dev, dtype=dtype)

    def fused(q, k, v):
        return fused_laplacian_op(q, k, v, cfg.kernel)

    return {
        "standard": _fwd_bwd(standard_op, q, k, v, grad),
        "laplacian_fused": _fwd_bwd(fused, q, k, v, grad),
        "laplacian_composed": _fwd_bwd(composed_laplacian_op, q, k, v, grad),
        "laplacian_naive": _fwd_bwd(naive_laplacian_op, q, k, v, grad),
    }


def operator_result(T: int, t: dict[str, float], mem: dict[str, int]) -> dict:
    """One sequence length's entry from median seconds ``t`` and peak bytes ``mem``."""
    return {
        "T": T,
        "median_ms": {k_: 1e3 * s for k_, s in t.items()},
        "peak_mb": {k_: b / 2**20 for k_, b in mem.items()},
        "naive_over_fused": t["laplacian_naive"] / t["laplacian_fused"],
        "fused_over_standard": t["laplacian_fused"] / t["standard"],
        "fused_peak_over_standard": mem["laplacian_fused"] / max(mem["standard"], 1),
        "composed_peak_over_standard": mem["laplacian_composed"] / max(mem["standard"], 1),
    }


def _batch(cfg: LaplacianBenchConfig, model) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(inputs, targets, classes): token windows for a language model, images for a ViT."""
    g = torch.Generator().manual_seed(0)
    c = model.config
    if hasattr(c, "image_size"):  # (B, C, S, S) images and (B,) labels
        x = torch.randn(cfg.train_batch, c.in_chans, c.image_size, c.image_size, generator=g)
        y = torch.randint(0, c.num_classes, (cfg.train_batch,), generator=g)
        return x.to(cfg.device), y.to(cfg.device), c.num_classes
    T = min(cfg.train_seq_len, c.block_size)
    idx = torch.randint(0, c.vocab_size, (cfg.train_batch, T + 1), generator=g)
    return idx[:, :-1].to(cfg.device), idx[:, 1:].to(cfg.device), c.vocab_size


def _train_step_fn(cfg: LaplacianBenchConfig, name: str, n_laplacian: int):
    from tokengeo.models.registry import create_model

    torch.manual_seed(0)
    model = create_model(name, n_laplacian=n_laplacian, kernel=cfg.kernel, device=cfg.device)
    forward = torch.compile(model) if cfg.compile else model  # compiled at the first step
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y, classes = _batch(cfg, model)
    device_type = torch.device(cfg.device).type
    autocast = cfg.precision in ("bf16", "fp16")
    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float16

    def step():
        with torch.autocast(device_type, dtype=dtype, enabled=autocast):
            out = forward(x)  # (B, T, V) or (B, classes)
            loss = F.cross_entropy(out.reshape(-1, classes).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, model.config.n_heads


def _train_fns(cfg: LaplacianBenchConfig, name: str) -> tuple[dict, int]:
    """A train step of model ``name`` per k ∈ {0, H/2, H} Laplacian heads, and H."""
    _, H = _train_step_fn(cfg, name, 0)
    ks = sorted({0, H // 2, H})
    return {f"k={k}": _train_step_fn(cfg, name, k)[0] for k in ks}, H


def train_result(name: str, H: int, t: dict[str, float], mem: dict[str, int]) -> dict:
    """One model's entry from median seconds ``t`` and peak bytes ``mem`` per k."""
    return {
        "model": name,
        "n_heads": H,
        "median_ms": {k: 1e3 * s for k, s in t.items()},
        "peak_mb": {k: b / 2**20 for k, b in mem.items()},
        "ratio_vs_k0": {k: t[k] / t["k=0"] for k in t},
        "peak_ratio_vs_k0": {k: mem[k] / max(mem["k=0"], 1) for k in mem},
    }


def _peaks(fns: dict, dev: torch.device, warmup: int = 2) -> dict[str, int]:
    """Peak bytes of each function, after ``warmup`` calls of each (plans made, caches
    and thread pools warm, as before the timings)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    return {name: peak_bytes(fn, dev) for name, fn in fns.items()}


def run(cfg: LaplacianBenchConfig, log: Callable[[str], None] | None = None) -> dict:
    """The whole benchmark; ``log`` (if given) hears each stage as it starts.

    Two passes over the stages: peak memory first, in the allocator state
    :func:`~tokengeo.bench.measure.ensure_precise_rss` set (resident memory tracks live
    tensors), then the times, after :func:`~tokengeo.bench.measure.allocate_for_timing`
    (tensors reused from the heap, as in a user's process).
    """
    log = log or (lambda msg: None)
    dev = torch.device(cfg.device)
    if dev.type == "cuda":
        return _cuda(cfg, log)
    n_stages = 2 * (len(cfg.seq_lens) + len(cfg.models))
    op_mem, train_mem = [], []
    for i, T in enumerate(cfg.seq_lens, 1):
        log(f"[{i}/{n_stages}] attention operator, T={T}: peak memory")
        op_mem.append(_peaks(_operator_fns(cfg, T), dev))
    for i, name in enumerate(cfg.models, len(op_mem) + 1):
        log(f"[{i}/{n_stages}] {name} training step: peak memory")
        train_mem.append(_peaks(_train_fns(cfg, name)[0], dev))
    allocator = "steady" if allocate_for_timing() else "as started"
    ops, trains = [], []
    for i, (T, mem) in enumerate(zip(cfg.seq_lens, op_mem, strict=True), n_stages // 2 + 1):
        log(f"[{i}/{n_stages}] attention operator, T={T}: times")
        t = interleaved_medians(_operator_fns(cfg, T), repeats=cfg.op_repeats, device=dev)
        ops.append(operator_result(T, t, mem))
    for i, (name, mem) in enumerate(zip(cfg.models, train_mem, strict=True),
                                    n_stages // 2 + len(ops) + 1):
        log(f"[{i}/{n_stages}] {name} training step: times")
        fns, H = _train_fns(cfg, name)
        t = interleaved_medians(fns, repeats=cfg.train_repeats, device=dev)
        trains.append(train_result(name, H, t, mem))
    worst_train = max(v for train in trains for k, v in train["ratio_vs_k0"].items()
                      if k != "k=0")
    at512 = next((o for o in ops if o["T"] == 512), ops[0])
    return {
        "timing_allocator": allocator,
        "operator": ops,
        "train_step": trains,
        "targets": {
            "train_step_laplacian_over_baseline": {"value": worst_train, "target": "<= 1.03",
                                                   "met": worst_train <= 1.03},
            f"naive_over_fused_T{at512['T']}": {
                "value": at512["naive_over_fused"], "target": ">= 2.5",
                "met": at512["naive_over_fused"] >= 2.5},
            f"fused_peak_over_standard_T{at512['T']}": {
                "value": at512["fused_peak_over_standard"], "target": "<= 1.05",
                "met": at512["fused_peak_over_standard"] <= 1.05},
        },
    }


def _cuda(cfg: LaplacianBenchConfig, log: Callable[[str], None]) -> dict:
    """Every kernel of the table on CUDA, and the targets: the bf16 operator at the first
    T (``auto``, all heads Laplacian) and the worst train step of ``auto``."""
    from tokengeo.bench.laplacian_cuda import kernel_figures

    figures = kernel_figures(cfg, log)
    first = next(o for o in figures["operator"] if o["dtype"] == "bf16" and not o["packed"])
    op = first["time_over_standard"].get("auto[lap]", math.nan)
    steps = [t for t in figures["train_step"] if t.get("kernel") == "auto" and "ratio_vs_k0" in t]
    worst = max((v for t in steps for k, v in t["ratio_vs_k0"].items() if k != "k=0"),
                default=math.nan)
    figures["targets"] = {
        f"operator_bf16_T{first['T']}_over_standard": {"value": op, "target": "<= 1.05",
                                                      "met": op <= 1.05},
        "train_step_laplacian_over_baseline": {"value": worst, "target": "<= 1.03",
                                               "met": worst <= 1.03},
    }
    return figures


def table(result: dict) -> str:
    """The figures of :func:`run` (as :func:`tokengeo.bench.registry.run` wraps them) as
    text: the CPU operator and train-step tables, or on CUDA the kernels' ratios."""
    figures = result["figures"]
    if "kernels" in figures:
        return _cuda_table(result)
    lines = ["Laplacian heads benchmark (fwd+bwd; medians; ratios measured in one process)",
             f"{'T':>6} {'standard ms':>12} {'fused ms':>10} {'naive ms':>10} "
             f"{'naive/fused':>12} {'fused/std':>10} {'mem fused/std':>14}"]
    for o in figures["operator"]:
        m = o["median_ms"]
        lines.append(f"{o['T']:>6} {m['standard']:>12.2f} {m['laplacian_fused']:>10.2f} "
                     f"{m['laplacian_naive']:>10.2f} {o['naive_over_fused']:>12.2f} "
                     f"{o['fused_over_standard']:>10.3f} {o['fused_peak_over_standard']:>14.3f}")
    for tr in figures["train_step"]:
        lines.append(f"train step ({tr['model']}, H={tr['n_heads']}):")
        for k, ms in tr["median_ms"].items():
            lines.append(f"  {k:<6} {ms:8.1f} ms  ratio {tr['ratio_vs_k0'][k]:.3f}  "
                         f"peak {tr['peak_mb'][k]:.1f} MB")
    return "\n".join(lines + _target_lines(result["targets"]))


def _cuda_table(result: dict) -> str:
    lines = ["Laplacian heads on CUDA (fwd+bwd; CUDA-event medians; time over standard SDPA)"]
    for o in result["figures"]["operator"]:
        ratios = "  ".join(f"{n} {r:.2f}" for n, r in o["time_over_standard"].items()
                           if n != "standard")
        lines.append(f"{o['dtype']} T={o['T']}{' packed' if o['packed'] else ''}: {ratios}")
    for tr in result["figures"]["train_step"]:
        if "ratio_vs_k0" in tr:
            ratios = "  ".join(f"{k} {r:.3f}" for k, r in tr["ratio_vs_k0"].items())
            lines.append(f"train step {tr['model']} kernel={tr['kernel']}: {ratios}")
    return "\n".join(lines + _target_lines(result["targets"]))


def _target_lines(targets: dict) -> list[str]:
    return [f"target {name}: {t['value']:.3f} ({t['target']}) "
            f"{'met' if t['met'] else 'NOT met'}" for name, t in targets.items()]
