"""``--device cuda`` on similarity, probe and flow gives the CPU's numbers (to the rounding of
the GPU's arithmetic). CUDA only: ``make gpu-check`` runs them (``pytest -m cuda``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokengeo.cli import main

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(autouse=True)
def _no_bars(monkeypatch):
    monkeypatch.setenv("CI", "1")


def test_flow_on_cuda_matches_the_cpu(tmp_path):
    runs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        assert main(["flow", "--preset", "s2-ou", "--T", "0.2", "--dt", "0.01",
                     "--record-every", "1", "--n-paths", "2", "--noise-var", "0",
                     "--scaling-heads", "none", "--heads", "3", "--no-figures", "--quiet",
                     "--device", device, "--out", str(out)]) == 0
        runs[device] = json.loads((out / "flow.json").read_text())
    assert runs["cuda"]["device"] == "cuda"
    cpu, gpu = (np.asarray(runs[d]["main_run"]["E"]["paths"]) for d in ("cpu", "cuda"))
    np.testing.assert_allclose(gpu, cpu, rtol=1e-9, atol=1e-12)


def test_similarity_on_cuda_matches_the_cpu(tmp_path):
    from helpers.tiny_llama import save_tiny_llama

    folder = save_tiny_llama(tmp_path / "llama")
    means = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        assert main(["similarity", "--model", str(folder), "--corpus", "shakespeare",
                     "--samples", "8", "--seq-len", "32", "--batch-size", "4", "--no-figures",
                     "--quiet", "--device", device, "--out", str(out)]) == 0
        assert json.loads((out / "config.json").read_text())["device"] == device
        means[device] = np.load(out / "mean_similarity.npy")
    np.testing.assert_allclose(means["cuda"], means["cpu"], rtol=1e-3, atol=1e-4)


def test_probe_on_cuda_matches_the_cpu(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--model", "vit-tiny", "--data", "digits", "--batch-size", "16",
                 "--steps", "2", "--set", "model_overrides.d_model=32",
                 "--set", "model_overrides.n_layers=1", "--set", "warmup=0",
                 "--set", "eval_every=0", "--set", "final_eval_batches=1", "--quiet",
                 "--device", "cpu", "--out", str(run)]) == 0
    geometry = {}
    for device in ("cpu", "cuda"):
        assert main(["probe", str(run), "--examples", "64", "--device", device]) == 0
        geometry[device] = json.loads((run / "probe.json").read_text())["geometry"]
    floats = [k for k, v in geometry["cpu"].items() if isinstance(v, float)]
    assert floats
    for k in floats:
        assert geometry["cuda"][k] == pytest.approx(geometry["cpu"][k], rel=1e-2, abs=1e-4), k
