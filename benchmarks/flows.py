"""Benchmark: tokengeo.flows.simulate vs a straightforward materialising implementation.

Claim (issue 16): at n = 200 tokens, H = 100 heads, 10 paths, d = 3, float64, the chunked
simulator takes >= 20x fewer seconds per Euler step than the authors' per-step computation (a
direct transcription that materialises every (paths, H, n, n) kernel, Euler), with
trajectories agreeing to 1e-9. Both run in this process, each warmed up once, then alternating;
the ratio of medians is reported as one JSON object, with the load average while it ran.

    python benchmarks/flows.py [--steps 5] [--repeats 3] [--n 200] [--heads 100] [--paths 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import torch

from tokengeo.flows import simulate
from tokengeo.flows.weights import ou_drift, symmetric_increment


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--heads", type=int, default=100)
    parser.add_argument("--paths", type=int, default=10)
    parser.add_argument("--d", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dt", type=float, default=5e-3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(args.paths, args.n, args.d, generator=g, dtype=torch.float64)
    x0 = x0 / x0.norm(dim=-1, keepdim=True)
    Z = torch.randn(args.paths, args.heads, args.d, args.d, generator=g, dtype=torch.float64)
    D0 = Z + Z.mT
    T = args.steps * args.dt
    run_kw = dict(T=T, dt=args.dt, noise_var=2.0, seed=1)

    def ours():
        r = simulate(x0, D0, drift="ou", n_paths=args.paths, record_every=args.steps,
                     record_trajectory=True, **run_kw)
        return r.x[:, -1], torch.stack([r.dE_int[:, -1], r.ito_int[:, -1],
                                         r.G2_int[:, -1], r.mart_int[:, -1]])

    def ref():
        return reference_run(x0, D0, **run_kw)

    times = {"ours": [], "reference": []}
    outs = {}
    ours()  # warm-up (both sides: the first run of each pays page faults and caches)
    ref()
    load_before = os.getloadavg()[0]
    for _ in range(args.repeats):
        for name, fn in (("ours", ours), ("reference", ref)):
            t0 = time.perf_counter()
            outs[name] = fn()
            times[name].append((time.perf_counter() - t0) / args.steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    x_err = (outs["ours"][0] - outs["reference"][0]).abs().max().item()
    sum_err = (outs["ours"][1] - outs["reference"][1]).abs().max().item()
    print(json.dumps({
        "benchmark": "flows",
        "claim": "seconds per Euler step, chunked simulate vs materialising reference",
        "ratio": med["reference"] / med["ours"],
        "target_ratio": 20.0,
        "median_s_per_step": med,
        "all_s_per_step": times,
        "max_abs_diff_tokens": x_err,
        "max_abs_diff_balance_sums": sum_err,
        "agree_1e-9": x_err <= 1e-9 and sum_err <= 1e-9,
        "config": {"n": args.n, "H": args.heads, "paths": args.paths, "d": args.d,
                   "steps": args.steps, "repeats": args.repeats, "dt": args.dt,
                   "dtype": "float64", "noise_var": 2.0, "drift": "ou",
                   "threads": torch.get_num_threads()},
        "load_avg_1min": [load_before, os.getloadavg()[0]],
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
