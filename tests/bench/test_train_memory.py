"""Peak memory of a real training step (tokengeo.bench.train_memory): on a CPU it is measured
in a fresh interpreter whose allocator maps every allocation of a page or more, and it counts
parameters, gradients, Adam's two moments and activations."""

import json
import subprocess

import pytest

from tokengeo.bench import train_memory
from tokengeo.models.ltransformer import LTransformerConfig

CFG = LTransformerConfig(d_model=64, p=4, n_heads=1, n_layers=1, vocab_size=100, max_len=16)


def test_cpu_measurement_runs_in_a_fresh_process_with_the_mmap_threshold(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    seen = {}

    def fake_run(cmd, input, env, **kwargs):
        seen.update(cmd=cmd, request=json.loads(input), env=env)
        return subprocess.CompletedProcess(cmd, 0, stdout="[]", stderr="")

    monkeypatch.setattr(train_memory.subprocess, "run", fake_run)
    assert train_memory.training_peaks(CFG, [2, 4], 16) == []
    assert seen["env"]["MALLOC_MMAP_THRESHOLD_"] == "4096"
    assert seen["cmd"][-2:] == ["-m", "tokengeo.bench.train_memory"]
    assert seen["request"]["batches"] == [2, 4] and seen["request"]["config"]["d_model"] == 64


def test_a_failed_measurement_says_so(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(train_memory.subprocess, "run", lambda cmd, **kw: (
        subprocess.CompletedProcess(cmd, 1, stdout="", stderr="MemoryError")))
    with pytest.raises(RuntimeError, match="training-memory measurement failed: MemoryError"):
        train_memory.training_peaks(CFG, [2], 16)


@pytest.mark.slow  # a fresh interpreter, two models, two batch sizes: ~15-50 s
def test_peak_counts_optimizer_state_and_grows_with_the_batch():
    # d = 128: the slices' weights are 16 KiB, above the page-sized mmap threshold (below
    # it the heap reuses pages freed by the warm-up run, and the resident set undercounts)
    cfg = LTransformerConfig(d_model=128, p=4, n_heads=1, n_layers=1, vocab_size=100,
                             max_len=16)
    peaks = train_memory.training_peaks(cfg, [2, 64], 16)
    for name in ("ltransformer", "fair_baseline"):
        mine = sorted((p for p in peaks if p.name == name), key=lambda p: p.batch)
        assert all(p.peak_bytes >= 4 * p.parameter_bytes for p in mine)
        assert mine[0].peak_bytes < mine[-1].peak_bytes
