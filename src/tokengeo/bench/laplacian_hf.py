"""Benchmark: a pretrained LLM with Laplacian heads vs plain, forward and generate tokens/s.

Claim: SmolLM2-135M with k=3 Laplacian heads per layer
(``tokengeo.laplacianize(model, n_laplacian=3)``) keeps >= 0.97 of the plain model's
throughput, for a forward pass (batch 4 x 128 tokens) and for greedy generation
(32 new tokens, ``DynamicCache``).

Method: one model in one process. Each repetition times the plain model and the
laplacianized one on the same inputs, alternating which goes first; the patch is put on
and taken off between the timings (no weight changes: the weights are shared). Ratios are
Laplacian tokens/s over plain tokens/s from the medians. Checks in the output: taking
the patch off restores the plain logits exactly, and the patch does change them.
Prints one JSON object.

Command line: ``python benchmarks/laplacian_hf.py [--quick] [--threads N] [--device cuda]``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

VARIANTS = ("plain", "laplacian")
TARGET_RATIO = 0.97
PROMPT = "The capital of France is"


@dataclass
class HFBenchConfig:
    model: str = "smollm2-135m"
    n_laplacian: int = 3
    batch: int = 4  # forward: batch x seq_len tokens
    seq_len: int = 128
    new_tokens: int = 32  # generate: greedy, from PROMPT, batch 1
    repeats: int = 10
    warmup: int = 1
    device: str = "cpu"
    seed: int = 0
    plain_only: bool = False  # time the plain model only (no laplacianize)


def _sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def _timed(fn: Callable[[], object], sync: Callable[[], None]) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


class Switch:
    """Puts the model in one variant; calls the (un)patch only when the variant changes,
    so a plain-only run never touches :mod:`tokengeo.models.hf`."""

    def __init__(self, model, n_laplacian: int) -> None:
        self.model, self.n_laplacian, self.current = model, n_laplacian, "plain"

    def __call__(self, variant: str) -> None:
        from tokengeo.models.hf import laplacianize, unlaplacianize

        if variant == self.current:
            return
        if variant == "laplacian":
            laplacianize(self.model, n_laplacian=self.n_laplacian)
        else:
            unlaplacianize(self.model)
        self.current = variant


def _workloads(model, tokenizer, cfg: HFBenchConfig) -> dict[str, Callable[[], object]]:
    """The two timed calls: a cache-free forward pass and greedy generation."""
    from transformers import DynamicCache

    device = torch.device(cfg.device)
    gen = torch.Generator().manual_seed(cfg.seed)
    ids = torch.randint(len(tokenizer), (cfg.batch, cfg.seq_len), generator=gen).to(device)
    prompt = tokenizer(PROMPT, return_tensors="pt").input_ids.to(device)  # (1, P)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def forward():
        return model(input_ids=ids, use_cache=False).logits  # (B, T, V)

    def generate():
        out = model.generate(  # greedy; the default cache of a decoder is a DynamicCache
            input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
            max_new_tokens=cfg.new_tokens, min_new_tokens=cfg.new_tokens, pad_token_id=pad,
            return_dict_in_generate=True,
        )
        new = out.sequences.shape[1] - prompt.shape[1]
        cache = out["cache"] if "cache" in out else out["past_key_values"]  # transformers 5 | 4
        if new != cfg.new_tokens or not isinstance(cache, DynamicCache):
            raise RuntimeError(f"generate gave {new} new tokens (expected {cfg.new_tokens}) "
                               f"with a {type(cache).__name__} (expected DynamicCache)")
        return out.sequences

    return {"forward": forward, "generate": generate}


def _checks(forward: Callable[[], torch.Tensor], switch: Switch, variants) -> dict:
    """Plain logits before == after a patch on/off cycle; the patch changes the logits."""
    if "laplacian" not in variants:
        return {}
    plain = forward()
    switch("laplacian")
    patched = forward()
    switch("plain")
    return {"plain_restored_exactly": bool(torch.equal(plain, forward())),
            "laplacian_changes_logits": not bool(torch.equal(plain, patched))}


def measure(model, tokenizer, cfg: HFBenchConfig, variants=VARIANTS) -> dict:
    """Median seconds and tokens/s of each workload and variant, interleaved; the ratios."""
    device = torch.device(cfg.device)
    sync, switch = _sync(device), Switch(model, cfg.n_laplacian)
    work = _workloads(model, tokenizer, cfg)
    times = {(w, v): [] for w in work for v in variants}
    with torch.inference_mode():
        checks = _checks(work["forward"], switch, variants)
        for rep in range(cfg.warmup + cfg.repeats):
            order = variants if rep % 2 == 0 else variants[::-1]
            for variant in order:
                switch(variant)
                for name, fn in work.items():
                    seconds = _timed(fn, sync)
                    if rep >= cfg.warmup:
                        times[name, variant].append(seconds)
        switch("plain")
    tokens = {"forward": cfg.batch * cfg.seq_len, "generate": cfg.new_tokens}
    result = {"checks": checks, "generate_cache": "DynamicCache",
              "prompt_tokens": len(tokenizer(PROMPT).input_ids)}
    for name in work:
        entry = {"tokens_per_call": tokens[name]}
        for variant in variants:
            median = statistics.median(times[name, variant])
            entry[f"{variant}_median_s"] = median
            entry[f"{variant}_tokens_per_s"] = tokens[name] / median
        if "laplacian" in variants and "plain" in variants:
            entry["ratio"] = entry["laplacian_tokens_per_s"] / entry["plain_tokens_per_s"]
            entry["meets_target"] = entry["ratio"] >= TARGET_RATIO
        result[name] = entry
    return result


def run(cfg: HFBenchConfig, variants=None) -> dict:
    """Load ``cfg.model`` (tokengeo.models.hf.pretrained.load), measure it, describe the setup."""
    if variants is None:
        variants = ("plain",) if cfg.plain_only else VARIANTS
    import transformers

    from tokengeo.models.hf.pretrained import load

    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    model, tokenizer = load(cfg.model)
    load_s = time.perf_counter() - t0
    model.to(cfg.device)
    result = {"benchmark": "laplacian_hf", "config": asdict(cfg), "variants": list(variants),
              "target_ratio": TARGET_RATIO, "load_s": load_s, "model_class": type(model).__name__,
              "attn_implementation": model.config._attn_implementation,
              "torch": torch.__version__, "transformers": transformers.__version__,
              "threads": torch.get_num_threads()}
    result.update(measure(model, tokenizer, cfg, variants))
    return result
