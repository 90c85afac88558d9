"""Benchmark: tokengeo.flows.simulate vs a straightforward materialising implementation.

Claim: at n = 200 tokens, H = 100 heads, 10 paths, d = 3, float64, the chunked
simulator takes >= 20x fewer seconds per Euler step than the authors' per-step computation (a
direct transcription that materialises every (paths, H, n, n) kernel, Euler), with
trajectories agreeing to 1e-9. Both run in this process, each warmed up once, then
alternating; :func:`run` reports the ratio of medians and the load average while it ran.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass

import torch

from tokengeo.bench.measure import interleaved_times
from tokengeo.flows import FlowConfig, simulate
from tokengeo.flows.weights import ou_drift, symmetric_increment


@dataclass
class FlowsBenchConfig:
    n: int = 200  # tokens
    heads: int = 100
    paths: int = 10
    d: int = 3
    steps: int = 5  # Euler steps per timed run
    repeats: int = 3
    dt: float = 5e-3
    threads: int = 1  # torch threads (both sides)
    dtype: str = "float64"  # ours: float64, or float32 (kernels) with float64 balance sums


def reference_run(x0, D0, *, T, dt, noise_var, seed):
    """The authors' Euler scheme (arXiv 2605.18870, Sec. 6), every (P, H, n, n) tensor in memory.

    Returns the tokens at T (P, n, d) and the balance sums (dE_int, ito_int, G2_int, mart_int).
    """
    gen = torch.Generator().manual_seed(seed)
    x, D = x0.clone(), D0.clone()
    P, H = D.shape[0], D.shape[1]
    n = x.shape[1]
    sigma, scale = math.sqrt(noise_var), 1.0 / (2 * H * n * n)
    sums = torch.zeros(4, P, dtype=x.dtype)
    for k in range(round(T / dt)):
        dW = sigma * symmetric_increment(D.shape, dt, gen, dtype=x.dtype)  # (P, H, d, d)
        f = ou_drift(D, k * dt)  # (P, H, d, d)
        S = torch.einsum("pid,phde,pje->phij", x, D, x)  # (P, H, n, n)
        K = torch.exp(S)  # (P, H, n, n)
        N = K.sum(-1)  # (P, H, n)
        A = K / N.unsqueeze(-1)  # (P, H, n, n)
        Dx = torch.einsum("phde,pje->phjd", D, x)  # (P, H, n, d)
        u = torch.einsum("phij,phjd->pid", A, Dx) / H  # (P, n, d)
        v = u - x * (x * u).sum(-1, keepdim=True)
        mobility = (n / N).mean(1)  # (P, n)
        G2 = (v.square().sum(-1) / mobility).mean(-1)
        xfx = torch.einsum("pid,phde,pje->phij", x, f, x)  # (P, H, n, n)
        C2 = torch.einsum("pid,pjd->pij", x, x).square().unsqueeze(1)  # (P, 1, n, n)
        xwx = torch.einsum("pid,phde,pje->phij", x, dW, x)  # (P, H, n, n)
        sums[0] += scale * (K * xfx).sum((1, 2, 3)) * dt
        sums[1] += noise_var / 4 * scale * (K * (C2 + 1)).sum((1, 2, 3)) * dt
        sums[2] += G2 * dt
        sums[3] += scale * (K * xwx).sum((1, 2, 3))
        x = x - dt * v
        x = x / x.norm(dim=-1, keepdim=True)
        D = D + f * dt + dW
    return x, sums


def run(cfg: FlowsBenchConfig) -> dict:
    """Seconds per Euler step of both implementations, their ratio and their agreement."""
    torch.set_num_threads(cfg.threads)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(cfg.paths, cfg.n, cfg.d, generator=g, dtype=torch.float64)
    x0 = x0 / x0.norm(dim=-1, keepdim=True)  # (P, n, d)
    Z = torch.randn(cfg.paths, cfg.heads, cfg.d, cfg.d, generator=g, dtype=torch.float64)
    D0 = Z + Z.mT  # (P, H, d, d)
    run_kw = dict(T=cfg.steps * cfg.dt, dt=cfg.dt, noise_var=2.0, seed=1)
    outs = {}

    if cfg.dtype not in ("float64", "float32"):
        raise ValueError(f"dtype={cfg.dtype!r} must be 'float64' or 'float32'")
    dtype = getattr(torch, cfg.dtype)

    def ours():
        r = simulate(x0.to(dtype), D0.to(dtype), FlowConfig(
            drift="ou", n_paths=cfg.paths, record_every=cfg.steps, record_trajectory=True,
            dtype=dtype, **run_kw))
        outs["ours"] = r.x[:, -1], torch.stack([r.dE_int[:, -1], r.ito_int[:, -1],
                                                 r.G2_int[:, -1], r.mart_int[:, -1]])

    def ref():
        outs["reference"] = reference_run(x0, D0, **run_kw)

    ours()  # warm-up (both sides: the first run of each pays page faults and caches)
    ref()
    load_before = os.getloadavg()[0]
    times = interleaved_times({"ours": ours, "reference": ref}, repeats=cfg.repeats, warmup=0)
    times = {k: [t / cfg.steps for t in v] for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    x_err = (outs["ours"][0] - outs["reference"][0]).abs().max().item()
    sum_err = (outs["ours"][1] - outs["reference"][1]).abs().max().item()
    return {
        "benchmark": "flows",
        "claim": "seconds per Euler step, chunked simulate vs materialising reference",
        "ratio": med["reference"] / med["ours"],
        "target_ratio": 20.0,
        "median_s_per_step": med,
        "all_s_per_step": times,
        "max_abs_diff_tokens": x_err,
        "max_abs_diff_balance_sums": sum_err,
        "agree_1e-9": x_err <= 1e-9 and sum_err <= 1e-9,  # float32 draws other noise: False

        "config": {**asdict(cfg), "noise_var": 2.0, "drift": "ou",
                   "threads": torch.get_num_threads()},
        "load_avg_1min": [load_before, os.getloadavg()[0]],
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
    }


@dataclass
class GpuFlowsConfig:
    """The GPU comparison: n = 1000, d = 16, H = 32, 10 paths, 100 Euler steps (OU, float64),
    and the paper's n = 200 (d = 3, H = 100) on CUDA against this machine's CPU."""

    large: tuple[int, int, int] = (1000, 16, 32)  # (n, d, H)
    small: tuple[int, int, int] = (200, 3, 100)
    paths: int = 10
    steps: int = 100
    cpu_steps: int = 10  # the CPU is timed on fewer steps and scaled to ``steps``
    dt: float = 5e-3
    chunk_elems: int = 1 << 26  # 512 MB of float64 kernel strips: few strips per step on a GPU


def _timed_run(x0, D0, cfg: GpuFlowsConfig, steps: int, **kw) -> float:
    """Seconds of one simulate of ``steps`` OU Euler steps (after one untimed warm-up run)."""
    import time

    def once():
        simulate(x0, D0, FlowConfig(drift="ou", noise_var=2.0, T=steps * cfg.dt, dt=cfg.dt,
                                    n_paths=cfg.paths, record_every=20, seed=1, **kw))
        if x0.is_cuda:
            torch.cuda.synchronize()

    once()
    start = time.perf_counter()
    once()
    return time.perf_counter() - start


def gpu_timings(cfg: GpuFlowsConfig | None = None) -> dict:
    """Seconds for ``cfg.steps`` steps at both sizes: CUDA graphed (float64 and float32 with
    float64 sums), CUDA eager float64 (the launch-bound baseline) and the CPU with all its
    threads (timed on ``cfg.cpu_steps`` steps and scaled). Targets: at n = 1000 the graphed
    float64 or float32 run >= 10x faster than 7.2 s (the H200's eager time before graphs);
    at n = 200, >= 3x faster than the CPU. Needs a CUDA device."""
    cfg = cfg or GpuFlowsConfig()
    if not torch.cuda.is_available():
        raise RuntimeError("gpu_timings needs a CUDA device; none is available")
    torch.set_num_threads(os.cpu_count() or 1)
    out: dict = {"benchmark": "flows-gpu", "config": asdict(cfg), "torch": torch.__version__,
                 "device": torch.cuda.get_device_name(), "cpu_threads": torch.get_num_threads()}
    for label, (n, d, H) in (("large", cfg.large), ("small", cfg.small)):
        g = torch.Generator().manual_seed(0)
        x0 = torch.randn(cfg.paths, n, d, generator=g, dtype=torch.float64)
        x0 = x0 / x0.norm(dim=-1, keepdim=True)  # (P, n, d)
        Z = torch.randn(cfg.paths, H, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        D0 = Z + Z.mT  # (P, H, d, d)
        xc, Dc = x0.cuda(), D0.cuda()
        row = {
            "n": n, "d": d, "H": H,
            "cuda_graph_f64_s": _timed_run(xc, Dc, cfg, cfg.steps, cuda_graph=True,
                                           chunk_elems=cfg.chunk_elems),
            "cuda_graph_f32_s": _timed_run(xc.float(), Dc.float(), cfg, cfg.steps,
                                           cuda_graph=True, dtype=torch.float32,
                                           chunk_elems=cfg.chunk_elems),
            "cuda_eager_f64_s": _timed_run(xc, Dc, cfg, cfg.steps, cuda_graph=False),
            "cpu_f64_s": _timed_run(x0, D0, cfg, cfg.cpu_steps) * cfg.steps / cfg.cpu_steps,
        }
        best = min(row["cuda_graph_f64_s"], row["cuda_graph_f32_s"])
        row["cpu_over_best_cuda"] = row["cpu_f64_s"] / best
        row["eager_over_graph_f64"] = row["cuda_eager_f64_s"] / row["cuda_graph_f64_s"]
        out[label] = row
    out["large"]["speedup_vs_7.2s"] = 7.2 / min(out["large"]["cuda_graph_f64_s"],
                                                out["large"]["cuda_graph_f32_s"])
    out["targets"] = {"large_speedup_vs_7.2s": 10.0, "small_cpu_over_best_cuda": 3.0}
    return out
