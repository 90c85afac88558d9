"""Peak memory of a real training step: parameters + gradients + optimizer state + activations.

El Ichi et al. (arXiv 2603.05727) report the L-Transformer's peak *training* memory against
a standard encoder (−15 % at d = 768 on a GPU). :func:`training_peak` measures the same
quantity for one model: it builds the model and an AdamW optimizer, then runs two training
steps (forward, backward, ``optimizer.step``; the first step creates Adam's two moment
buffers, the second runs with all of it live) and returns the peak bytes added from before
the model existed:

* CUDA: ``torch.cuda.max_memory_allocated`` − the bytes allocated before;
* CPU: the peak resident set added (``VmHWM`` − ``VmRSS`` before, Linux), which measures live
  tensors only when glibc's mmap threshold is fixed low (every allocation of a page or more
  is then mapped when allocated and unmapped when freed; :mod:`tokengeo.bench.measure` uses
  64 KiB, too coarse here: the L-Transformer's per-slice weights of a d = 128 model are
  16 KiB, and heap pages freed by an earlier run would hold them unseen).
  :func:`training_peaks` therefore measures on a CPU in a fresh interpreter started with
  ``MALLOC_MMAP_THRESHOLD_=4096`` (``python -m tokengeo.bench.train_memory``), whatever
  the calling process' allocator settings. Allocations below a page still come from the
  heap, which may reuse pages already resident: a model whose tensors are mostly that small
  (d < 128) is undercounted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from tokengeo.bench.measure import MMAP_ENV, peak_rss_bytes

PRECISE_MMAP = "4096"  # every tensor of a page or more mapped: small slices counted too
STEPS = 2  # the first creates the optimizer state; the second has everything live


@dataclass(frozen=True)
class TrainingPeak:
    """Peak bytes of a training step of model ``name`` (d = ``d_model_l`` of the
    L-Transformer it is compared with) at ``batch`` sequences of ``seq_len`` tokens."""

    name: str
    d_model_l: int
    batch: int
    seq_len: int
    peak_bytes: int
    parameter_bytes: int
    method: str  # "cuda max_memory_allocated" or "cpu peak RSS (4 KiB mmap threshold)"


def _models(cfg) -> dict:
    """The L-Transformer ``cfg`` and its fair baseline, as configs by name."""
    from tokengeo.models.lt_budget import fair_baseline

    return {"ltransformer": cfg, "fair_baseline": fair_baseline(cfg)}


def _build(name: str, cfg, device: str):
    from tokengeo.models.encoder import TextEncoder
    from tokengeo.models.ltransformer import LTransformer

    with torch.device(device):
        return LTransformer(cfg) if name == "ltransformer" else TextEncoder(cfg)


def training_peak(name: str, cfg, batch: int, seq_len: int, device: str = "cpu",
                  seed: int = 0) -> TrainingPeak:
    """Peak bytes of building ``name`` (``cfg``) with AdamW and running :data:`STEPS`
    training steps on a random batch (see the module docstring for what is counted)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, cfg.vocab_size, (batch, seq_len), generator=g).to(device)
    mask = torch.ones(batch, seq_len, dtype=torch.long, device=device)
    labels = torch.randint(0, cfg.num_classes, (batch,), generator=g).to(device)
    n_params = []

    def run() -> None:
        torch.manual_seed(seed)
        model = _build(name, cfg, device)
        n_params.append(sum(p.numel() * p.element_size() for p in model.parameters()))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(STEPS):
            F.cross_entropy(model(ids, mask), labels).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    if device.startswith("cuda"):
        dev = torch.device(device)
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        run()
        torch.cuda.synchronize(dev)
        peak, method = torch.cuda.max_memory_allocated(dev) - base, "cuda max_memory_allocated"
    else:
        peak, method = peak_rss_bytes(run), "cpu peak RSS (4 KiB mmap threshold)"
    return TrainingPeak(name, cfg.d_model if name == "ltransformer" else -1, batch, seq_len,
                        int(peak), n_params[0], method)


def _peaks_here(cfg, batches: list[int], seq_len: int, device: str) -> list[TrainingPeak]:
    """Each model at each batch size, after one unrecorded run at the smallest (so one-off
    allocations, such as libraries loading their kernels, are not counted)."""
    for name, c in _models(cfg).items():
        training_peak(name, c, min(batches), seq_len, device)
    out = []
    for batch in batches:
        for name, c in _models(cfg).items():
            row = training_peak(name, c, batch, seq_len, device)
            out.append(TrainingPeak(**{**asdict(row), "d_model_l": cfg.d_model}))
    return out


def training_peaks(cfg, batches: list[int], seq_len: int,
                   device: str = "cpu") -> list[TrainingPeak]:
    """:func:`training_peak` of the L-Transformer ``cfg`` and its fair baseline at each
    batch size. On a CPU without ``MALLOC_MMAP_THRESHOLD_=4096`` in this process, the
    measurement runs in a fresh interpreter that has it (the resident set then tracks live
    tensors)."""
    if device.startswith("cuda") or os.environ.get(MMAP_ENV) == PRECISE_MMAP:
        return _peaks_here(cfg, batches, seq_len, device)
    from tokengeo.models.ltransformer import LTransformerConfig

    if not isinstance(cfg, LTransformerConfig):
        raise TypeError("training_peaks needs an LTransformerConfig")
    request = {"config": asdict(cfg), "batches": batches, "seq_len": seq_len}
    env = {**os.environ, MMAP_ENV: PRECISE_MMAP}
    from tokengeo.lifetime import die_with_parent

    done = subprocess.run([sys.executable, "-m", "tokengeo.bench.train_memory"],
                          input=json.dumps(request), capture_output=True, text=True, env=env,
                          check=False, preexec_fn=die_with_parent)  # dies with this process
    if done.returncode != 0:
        raise RuntimeError(f"the training-memory measurement failed: {done.stderr[-2000:]}")
    from tokengeo.io import parse_json

    rows = parse_json(done.stdout, "the training-memory child's output", list)
    return [TrainingPeak(**row) for row in rows]


def main() -> None:
    """Read ``{"config", "batches", "seq_len"}`` (JSON) on stdin, print the peaks (JSON)."""
    from tokengeo.io import parse_json
    from tokengeo.models.ltransformer import LTransformerConfig

    request = parse_json(sys.stdin.read(), "the training-memory request on stdin", dict)
    cfg = LTransformerConfig(**request["config"])
    torch.set_num_threads(1)
    rows = _peaks_here(cfg, request["batches"], request["seq_len"], "cpu")
    print(json.dumps([asdict(r) for r in rows]))


if __name__ == "__main__":
    main()
