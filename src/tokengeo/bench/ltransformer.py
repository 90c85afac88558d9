"""Benchmark of the L-Transformer (El Ichi et al., arXiv 2603.05727) against its baseline.

Targets: with p = 4 slices run as one batched computation, a forward+backward step costs
<= 0.35x the standard encoder's at d = 768 (the projections and FFN are 1/p of the FLOPs;
attention, norms and the transform are not, and set the floor) and <= 1.0x at d = 128 and
256 (the paper, running slices one after another: ~0.93x and ~1.3x); encoder parameters are
0.24-0.27x. The same L-Transformer run slice after slice
(:class:`SequentialSlices`: p standard narrow blocks per layer, copied with
:func:`~tokengeo.nn.lblock.slice_block`) shows what batching the slices buys.

Heads: the baseline has head width 32 (d = 128, 256) or 64 (d = 768), and the L-Transformer
keeps that width with baseline_heads / p heads per slice, so both run the same number of
attention heads of the same size and differ only in their linear maps.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.bench.measure import allocate_for_timing, interleaved_medians, peak_bytes
from tokengeo.nn.lblock import slice_block


@dataclass
class LTransformerBenchConfig:
    widths: tuple[int, ...] = (128, 256, 768)
    baseline_heads: tuple[int, ...] = (4, 8, 12)  # head width 32, 32, 64
    p: int = 4
    n_layers: int = 4
    seq_len: int = 128
    batch: int = 32
    vocab_size: int = 1000
    num_classes: int = 2
    repeats: int = 7
    device: str = "cpu"
    seed: int = 0


CONTENDERS = ("baseline", "ltransformer", "ltransformer_sequential")
SPEED_TARGET_768 = 0.35  # L step / standard step at d = 768


class SequentialSlices(nn.Module):
    """An L-Transformer computed slice after slice, as the paper ran it.

    Slice k runs its own stack of standard blocks of width d_s (copies of slice k's weights,
    :func:`slice_block`); embedding, transform, final norm and head are the model's own
    (shared). By the equivalence theorem (arXiv 2603.05727) it computes ``model``'s function.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.slices = nn.ModuleList(
            nn.ModuleList(slice_block(block, k) for block in model.blocks)
            for k in range(model.config.p)
        )

    def embed(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        return self.model.embed(ids, attention_mask)  # (p, B, T, d_s), mask

    def encode(self, x_hat: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The encoder alone: slice k through its own blocks, (p, B, T, d_s) -> same."""
        outs = []
        for k, blocks in enumerate(self.slices):
            h = x_hat[k]  # (B, T, d_s)
            for block in blocks:
                h = block(h, mask)
            outs.append(h)
        return torch.stack(outs)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        x_hat, mask = self.embed(ids, attention_mask)  # (p, B, T, d_s)
        features = self.model.features_out(self.encode(x_hat, mask))  # (B, T, d)
        return self.model.forward_head(features, attention_mask)

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        """As the model's, counting the slice blocks instead of the model's L-blocks."""
        encoder = sum(p.numel() for p in [*self.slices.parameters(),
                                          *self.model.transform.parameters()])
        if only_blocks:
            return encoder
        return self.model.num_parameters() - self.model.num_parameters(only_blocks=True) + encoder


def _models(cfg: LTransformerBenchConfig, d: int, heads: int) -> dict[str, torch.nn.Module]:
    from tokengeo.models.registry import create_model

    shared = dict(d_model=d, n_layers=cfg.n_layers, vocab_size=cfg.vocab_size,
                  max_len=cfg.seq_len, num_classes=cfg.num_classes, device=cfg.device)
    torch.manual_seed(cfg.seed)
    base = create_model("encoder-tiny", n_heads=heads, **shared)
    lt = create_model("ltransformer-tiny", p=cfg.p, n_heads=heads // cfg.p, **shared)
    seq = SequentialSlices(lt)
    return dict(zip(CONTENDERS, (base, lt, seq), strict=True))


def _batch(cfg: LTransformerBenchConfig) -> tuple[torch.Tensor, ...]:
    """Token ids, a padding mask (lengths uniform in [T/2, T]) and labels."""
    g = torch.Generator().manual_seed(cfg.seed)
    B, T = cfg.batch, cfg.seq_len
    ids = torch.randint(1, cfg.vocab_size, (B, T), generator=g)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    labels = torch.randint(0, cfg.num_classes, (B,), generator=g)
    return tuple(t.to(cfg.device) for t in (ids, mask, labels))


def _step_fn(model: torch.nn.Module, ids, mask, labels):
    def step():
        F.cross_entropy(model(ids, mask), labels).backward()
        model.zero_grad(set_to_none=True)

    return step


def encode(model: nn.Module, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The encoder alone (the blocks, no embedding, final norm or head) on its input stream."""
    if isinstance(model, SequentialSlices):
        return model.encode(x, mask)
    for block in model.blocks:
        x = block(x, mask)
    return x


def _encoder_step_fn(model: nn.Module, ids, mask):
    """Forward+backward of the encoder alone: loss = mean(encode(X)²) on the embedded batch."""
    with torch.no_grad():
        x, block_mask = model.embed(ids, mask)  # the blocks' input, no gradient to the embedding

    def step():
        encode(model, x, block_mask).square().mean().backward()
        model.zero_grad(set_to_none=True)

    return step


def saved_bytes(fn, model: nn.Module) -> int:
    """Bytes of the activations autograd saves for backward while ``fn`` runs its forward.

    A deterministic measure of a step's activation memory (the same on every device and
    load): every saved tensor's storage counted once, ``model``'s parameters left out.
    """
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def width_memory(cfg: LTransformerBenchConfig, d: int, heads: int) -> dict:
    """Peak bytes of each contender's training step and encoder-only step, and the bytes
    autograd saves in the latter: measured before any timing (see :func:`run`)."""
    models = _models(cfg, d, heads)
    ids, mask, labels = _batch(cfg)
    dev = torch.device(cfg.device)
    steps = {name: _step_fn(m, ids, mask, labels) for name, m in models.items()}
    encoder = {name: _encoder_step_fn(m, ids, mask) for name, m in models.items()}
    return {
        "step": {name: peak_bytes(fn, dev) for name, fn in steps.items()},
        "encoder": {name: peak_bytes(fn, dev) for name, fn in encoder.items()},
        "saved": {name: saved_bytes(encoder[name], m) for name, m in models.items()},
    }


def bench_width(cfg: LTransformerBenchConfig, d: int, heads: int, memory: dict) -> dict:
    """Times of width ``d`` (interleaved medians) beside its ``memory``
    (:func:`width_memory`), and the ratios to the baseline."""
    models = _models(cfg, d, heads)
    ids, mask, labels = _batch(cfg)
    with torch.no_grad():
        seq_err = (models["ltransformer"](ids, mask)
                   - models["ltransformer_sequential"](ids, mask)).abs().max().item()
    fns = {name: _step_fn(m, ids, mask, labels) for name, m in models.items()}
    dev = torch.device(cfg.device)
    t = interleaved_medians(fns, repeats=cfg.repeats, device=dev)
    mem = memory["step"]
    enc = {name: m.num_parameters(only_blocks=True) for name, m in models.items()}
    return {
        **bench_encoder_only(cfg, models, ids, mask, memory),
        "d_model": d,
        "heads": {"baseline": heads, "ltransformer_per_slice": heads // cfg.p,
                  "head_dim": d // heads},
        "median_ms": {k: 1e3 * s for k, s in t.items()},
        "peak_mb": {k: b / 2**20 for k, b in mem.items()},
        "encoder_params": enc,
        "total_params": {name: m.num_parameters() for name, m in models.items()},
        "step_ratio_vs_baseline": {k: t[k] / t["baseline"] for k in CONTENDERS[1:]},
        "sequential_over_batched": t["ltransformer_sequential"] / t["ltransformer"],
        "peak_ratio_vs_baseline": {k: mem[k] / max(mem["baseline"], 1) for k in CONTENDERS[1:]},
        "encoder_params_ratio": enc["ltransformer"] / enc["baseline"],
        "sequential_max_abs_diff": seq_err,
    }


def bench_encoder_only(cfg: LTransformerBenchConfig, models: dict[str, nn.Module],
                       ids: torch.Tensor, mask: torch.Tensor, memory: dict) -> dict:
    """Encoder-only step (the blocks' forward+backward on the embedded batch, as the paper's
    1/p concerns the encoder): median time, and with ``memory`` (:func:`width_memory`) peak
    memory and saved activations; their ratios L / baseline."""
    fns = {name: _encoder_step_fn(m, ids, mask) for name, m in models.items()}
    dev = torch.device(cfg.device)
    t = interleaved_medians(fns, repeats=cfg.repeats, device=dev)
    mem, act = memory["encoder"], memory["saved"]
    return {
        "encoder_median_ms": {k: 1e3 * s for k, s in t.items()},
        "encoder_peak_mb": {k: b / 2**20 for k, b in mem.items()},
        "encoder_saved_mb": {k: b / 2**20 for k, b in act.items()},
        "encoder_step_ratio_vs_baseline": {k: t[k] / t["baseline"] for k in CONTENDERS[1:]},
        "encoder_peak_ratio_vs_baseline": {k: mem[k] / max(mem["baseline"], 1)
                                           for k in CONTENDERS[1:]},
        "encoder_saved_ratio_vs_baseline": {k: act[k] / act["baseline"] for k in CONTENDERS[1:]},
    }


def _target(value: float, lo: float | None, hi: float | None) -> dict:
    met = (lo is None or value >= lo) and (hi is None or value <= hi)
    text = f"in [{lo}, {hi}]" if lo is not None else f"<= {hi}"
    return {"value": value, "target": text, "met": met}


def run(cfg: LTransformerBenchConfig) -> dict:
    """Every width's peaks first, in the allocator state
    :func:`~tokengeo.bench.measure.ensure_precise_rss` set, then every width's times after
    :func:`~tokengeo.bench.measure.allocate_for_timing` (no page faults per allocation)."""
    load_before = os.getloadavg()
    widths = list(zip(cfg.widths, cfg.baseline_heads, strict=True))
    memory = [width_memory(cfg, d, h) for d, h in widths]
    allocator = "steady" if allocate_for_timing() else "as started"
    rows = [bench_width(cfg, d, h, m) for (d, h), m in zip(widths, memory, strict=True)]
    by_d = {r["d_model"]: r for r in rows}
    targets = {}
    for d, r in by_d.items():
        hi = SPEED_TARGET_768 if d >= 768 else 1.0
        targets[f"step_ratio_d{d}"] = _target(r["step_ratio_vs_baseline"]["ltransformer"], None, hi)
    widest = by_d[max(by_d)]
    targets[f"encoder_params_ratio_d{widest['d_model']}"] = _target(
        widest["encoder_params_ratio"], 0.24, 0.27)
    return {
        "benchmark": "ltransformer",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average_1_5_15min": {"before": load_before, "after": os.getloadavg()},
        "timing_allocator": allocator,
        "config": asdict(cfg),
        "widths": rows,
        "targets": targets,
    }


# --- efficiency accounting (arXiv 2603.05727: encoder ~1/p, projections/FFN ~1/p, -41 % size)

LINEAR_SUFFIXES = (".attn.qkv", ".attn.proj", ".mlp.fc1", ".mlp.fc2")


def counted_flops(model: nn.Module, ids: torch.Tensor,
                  mask: torch.Tensor | None = None) -> dict[str, int]:
    """Forward FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode``: the blocks'
    projections and FFN (modules ``*.attn.qkv|proj``, ``*.mlp.fc1|fc2``), the transform in
    (the ``*.transform`` module's call; the inverse is a method call, counted under the
    model) and the whole forward (attention kernels may go uncounted)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids, mask)
    per_module = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    return {
        "projections_and_ffn": sum(n for name, n in per_module.items()
                                   if name.endswith(LINEAR_SUFFIXES)),
        "transform_in": sum(n for name, n in per_module.items()
                            if name.endswith(".transform")),
        "total": counter.get_total_flops(),
    }


@dataclass
class EfficiencyRow:
    """One model's costs on one batch (training step = forward + backward of the loss)."""

    name: str
    d_model: int
    encoder_params: int
    total_params_bert_vocab: int  # with 30,522 tokens (analytic)
    flops_analytic: int  # projections + FFN (+ folded LN shifts), forward
    flops_counted: int  # the same, counted by FlopCounterMode
    transform_flops: int  # X ×₃ Z in and out (analytic; the counter sees the "in" half)
    saved_activation_bytes: int  # what autograd keeps for backward in one training step
    peak_bytes: int  # allocator peak (CUDA) or peak RSS added (CPU) of one training step
    step_ms: float | None = None  # median forward+backward step, timed round-robin


def efficiency(cfg, *, batch: int = 8, seq_len: int | None = None,
               device: str = "cpu", seed: int = 0, repeats: int = 0) -> list[EfficiencyRow]:
    """Costs of the L-Transformer ``cfg`` and its two baselines
    (:func:`~tokengeo.models.lt_budget.fair_baseline`,
    :func:`~tokengeo.models.lt_budget.param_matched_baseline`) on one random batch; with
    ``repeats`` > 0 the three training steps are also timed, interleaved (median ms)."""
    from tokengeo.models.encoder import TextEncoder
    from tokengeo.models.lt_budget import (
        fair_baseline,
        param_matched_baseline,
        projection_flops,
        total_parameter_count,
    )
    from tokengeo.models.ltransformer import LTransformer

    configs = {"ltransformer": cfg, "fair_baseline": fair_baseline(cfg),
               "param_matched": param_matched_baseline(cfg)}
    T = seq_len or cfg.max_len
    bench_cfg = LTransformerBenchConfig(batch=batch, seq_len=T, vocab_size=cfg.vocab_size,
                                        num_classes=cfg.num_classes, device=device, seed=seed)
    ids, mask, labels = _batch(bench_cfg)
    rows, steps = [], {}
    for name, c in configs.items():
        torch.manual_seed(seed)
        with torch.device(device):
            model = LTransformer(c) if name == "ltransformer" else TextEncoder(c)
        step = steps[name] = _step_fn(model, ids, mask, labels)
        counted = counted_flops(model, ids, mask)
        analytic = projection_flops(c, batch * T)
        rows.append(EfficiencyRow(
            name=name, d_model=c.d_model,
            encoder_params=model.num_parameters(only_blocks=True),
            total_params_bert_vocab=total_parameter_count(c),
            flops_analytic=analytic.projections_and_ffn,
            flops_counted=counted["projections_and_ffn"],
            transform_flops=analytic.transform,
            saved_activation_bytes=saved_bytes(step, model),
            peak_bytes=peak_bytes(step, torch.device(device)),
        ))
    if repeats > 0:
        medians = interleaved_medians(steps, repeats=repeats, device=torch.device(device))
        for row in rows:
            row.step_ms = 1e3 * medians[row.name]
    return rows
