"""`train` across "nodes": two torchrun agents (one process each) meet through the c10d
rendezvous, as on a Slurm allocation of two nodes (docs/scaling-out.md), here on localhost;
the run is one data-parallel run of world size 2 whose losses equal one process's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tokengeo.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
ARGS = ["--model", "vit-tiny", "--data", "digits", "--steps", "3", "--batch-size", "16",
        "--set", "warmup=0", "--set", "eval_every=0", "--set", "final_eval_batches=1",
        "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1", "--quiet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _losses(run: Path) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if r.get("split") == "train"]


@pytest.mark.slow  # two torchrun agents and their workers import torch (~1 min on 2 cores)
def test_two_nodes_through_the_c10d_rendezvous(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "CI": "1"}
    endpoint = f"localhost:{_free_port()}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
           "--rdzv_id", "tokengeo-test", "-m", "tokengeo", "train", *ARGS,
           "--out", str(tmp_path / "ddp")]
    nodes = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [node.communicate(timeout=280) for node in nodes]
    for node, (_, err) in zip(nodes, outputs, strict=True):
        said = [line for line in err.splitlines() if "tokengeo" in line or "Error" in line]
        assert node.returncode == 0, "\n".join(said[:20])
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert summary["world_size"] == 2
    assert main(["train", *ARGS, "--out", str(tmp_path / "single")]) == 0
    ddp, single = _losses(tmp_path / "ddp"), _losses(tmp_path / "single")
    assert len(ddp) == len(single) == 3
    assert ddp == pytest.approx(single, rel=1e-5)
