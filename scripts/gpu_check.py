"""`make gpu-check`: every check tokengeo has for a CUDA device, in one run, as one JSON.

Sections (each timed; one that fails records its error and the others still run, so one run
of a scarce GPU gives every figure it can):

1. ``env``        torch, CUDA, triton (torch.compile's GPU code generator) versions and the
   device;
2. ``cuda_tests`` ``pytest -m cuda`` (the kernels in every dtype against the float64
   reference, laplacianize on CUDA, the trainer, the flows simulator): counts and failures;
3. ``laplacian``  ``tokengeo bench laplacian --device cuda``: the operator table (bf16 / fp32,
   T = 1024 / 4096 / 8192, standard SDPA vs every kernel of the table) and the train-step
   ratios of gpt-small / vit-small per kernel (``tokengeo.bench.laplacian_cuda``);
4. ``flows``      the flow simulator on CUDA vs CPU (``tokengeo.bench.flows.gpu_timings``);
5. ``compiled``   train steps of gpt-small / vit-small through
   ``torch.compile(mode="reduce-overhead")`` (CUDA graphs), when at least 150 s of the budget
   are left; six compilations, so usually its own run: ``--only compiled``;
6. ``gpu_cells``  ``reproduce --gpu`` on CUDA at tiny sizes (the ``cuda`` tests of
   tests/experiments/test_reproduce_devices.py: a bf16 cell with its peak memory and step
   time, the tiny [gpu] table through two workers, DDP on two GPUs where there are two) and
   the ``reproduce --gpu --dry-run`` table;
7. ``reproduce_gpu`` (only with ``--only reproduce_gpu``: about 6 minutes, its own run)
   ``tokengeo reproduce --gpu --jobs 4`` into ``DIR/reproduce-gpu``: wall time, the summary
   table, the report's path (keep it for docs/results-gpu/).

Usage: ``python scripts/gpu_check.py [--out DIR] [--skip SECTION,...]``; writes
``DIR/gpu_check.json`` (default ``$OUT`` or ``runs/gpu``) and prints it. Budget: ≤ 8 min.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def env() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def cuda_tests(timeout: int = 200) -> dict:
    timeout = min(timeout, max(30, int(DEADLINE - (time.perf_counter() - START)) - 15))
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider",
           "-o", "addopts=", "--tb=line", "tests"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {"returncode": done.returncode, "summary": lines[-1] if lines else "",
            "failures": [ln for ln in lines if "Error" in ln or "FAILED" in ln][:40]}


def laplacian() -> dict:
    from tokengeo.bench import registry

    config = registry.benchmark("laplacian").make_config(device="cuda", op_repeats=15,
                                                           train_repeats=15)
    return registry.run("laplacian", config)


def compiled() -> dict:
    """Compiled train steps, if at least 150 s of the budget are left (each model compiles
    once per k)."""
    left = DEADLINE - (time.perf_counter() - START)
    if left < 150:
        return {"skipped": f"{left:.0f} s of the budget left; needs about 150"}
    from tokengeo.bench.laplacian_cuda import compiled_train_steps

    return {"train_step": compiled_train_steps()}


def gpu_cells(timeout: int = 150) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider",
           "-o", "addopts=", "--tb=line", "tests/experiments/test_reproduce_devices.py"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=env)
    lines = (done.stdout + done.stderr).strip().splitlines()
    dry = subprocess.run([sys.executable, "-m", "tokengeo", "reproduce", "--gpu", "--dry-run",
                          "--out", str(OUT_DIR / "reproduce-gpu")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env=env)
    return {"returncode": done.returncode, "summary": lines[-1] if lines else "",
            "failures": [ln for ln in lines if "Error" in ln or "FAILED" in ln][:20],
            "dry_run": dry.stdout.strip().splitlines()}


def reproduce_gpu(timeout: int = 590) -> dict:
    out = OUT_DIR / "reproduce-gpu"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tokengeo", "reproduce", "--gpu", "--jobs",
                           "4", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return {"returncode": done.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "summary": done.stdout.strip().splitlines()[-60:],
            "stderr_tail": done.stderr.strip().splitlines()[-20:],
            "report": str(out / "report.md")}


def flows() -> dict:
    from tokengeo.bench.flows import gpu_timings

    return gpu_timings()


# Cheapest first, so a run cut short still brings back the most figures.
START = time.perf_counter()
DEADLINE = float(os.environ.get("GPU_CHECK_SECONDS", "480"))  # the whole run's budget

SECTIONS = {"env": env, "laplacian": laplacian, "flows": flows, "cuda_tests": cuda_tests,
            "compiled": compiled, "gpu_cells": gpu_cells,
            "reproduce_gpu": reproduce_gpu}
OPT_IN = {"reproduce_gpu"}  # run only when named in --only
OUT_DIR = Path("runs/gpu")  # set by main from --out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "runs/gpu"))
    parser.add_argument("--skip", default="", help="comma-separated sections to skip")
    parser.add_argument("--only", default="", help="comma-separated sections to run")
    args = parser.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    only = {s for s in args.only.split(",") if s}
    global OUT_DIR
    out = OUT_DIR = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    for name, fn in SECTIONS.items():
        if name in skip or (only and name not in only and name != "env"):
            continue
        if name in OPT_IN and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception as e:  # recorded, so one failing section costs no other figure
            result[name] = {"error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()[-2000:]}
        result.setdefault("seconds", {})[name] = round(time.perf_counter() - t0, 1)
        (out / "gpu_check.json").write_text(json.dumps(result, indent=1))
        print(f"[gpu-check] {name}: {result['seconds'][name]} s", file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
