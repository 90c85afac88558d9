"""ViT-tiny on Fashion-MNIST at a fixed budget: k = 0, H/2, H Laplacian heads, several seeds.

Issue 3's target: a ViT-tiny reaches >= 85% test accuracy within 10 minutes on 2 CPU cores,
reported for k = 0 vs k = H/2 vs k = H at the same budget, 3 seeds each, mean +- std.

Each run is ``tokengeo train CONFIG --n-laplacian K --set seed=S`` (the budget lives in the
config file: ``scripts/vit-fashion-10min.toml``); runs go ``--jobs`` at a time, each with
``--threads`` torch threads. The accuracy is the full 10,000-image test set of the final
model; ``wall_time_s`` comes from each run's ``summary.json``. Prints one JSON object
(also written to ``OUT/budget.json``). Finished runs are read back, not retrained.

Run: ``python scripts/vit_budget.py --out runs/vit-budget [--ks 0,2,4] [--seeds 0,1,2]
[--jobs 2 --threads 1]``. Timing one run alone on both cores: ``--jobs 1 --threads 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CONFIG = Path(__file__).with_name("vit-fashion-10min.toml")


def run_one(out: Path, k: int, seed: int, threads: int, config: Path) -> dict:
    """Train (unless ``summary.json`` exists) and return the run's headline numbers."""
    run = out / f"k{k}-seed{seed}"
    summary = run / "summary.json"
    if not summary.exists():
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}  # torch's thread count
        cmd = [sys.executable, "-m", "tokengeo", "train", str(config), "--n-laplacian", str(k),
               "--set", f"seed={seed}", "--out", str(run),
               "--quiet"]
        log = (out / f"k{k}-seed{seed}.log").open("w")
        subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    s = json.loads(summary.read_text())
    return {"k": k, "seed": seed, "test_accuracy": s["final"]["test"]["accuracy"],
            "wall_time_s": s["wall_time_s"], "threads": threads}


def aggregate(rows: list[dict]) -> dict:
    """Mean and sample std of accuracy and wall time per k."""
    by_k: dict[int, list[dict]] = {}
    for row in rows:
        by_k.setdefault(row["k"], []).append(row)
    result = {}
    for k, runs in sorted(by_k.items()):
        acc = [r["test_accuracy"] for r in runs]
        wall = [r["wall_time_s"] for r in runs]
        result[str(k)] = {
            "seeds": [r["seed"] for r in runs], "accuracy": acc,
            "accuracy_mean": statistics.mean(acc),
            "accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
            "wall_time_s_mean": statistics.mean(wall), "wall_time_s_max": max(wall),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/vit-budget"))
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--ks", default="0,2,4")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    grid = [(k, s) for s in seeds for k in ks]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda ks_: run_one(args.out, *ks_, args.threads, args.config),
                             grid))
    payload = {"config": str(args.config), "jobs": args.jobs, "threads": args.threads,
               "runs": rows, "by_k": aggregate(rows)}
    (args.out / "budget.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
