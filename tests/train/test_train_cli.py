"""``tokengeo train``: flags, config file + --set, --resume, and every bad input -> exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tokengeo.cli import main
from tokengeo.train.tasks import ImageClassification
from tokengeo.train.trainer import Trainer

SRC = Path(__file__).resolve().parents[2] / "src"
TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "32",
        "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1",
        "--set", "warmup=1", "--set", "eval_batches=1", "--quiet"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("CI", "1")


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tokengeo train: error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("args, message", [
    (["--model", "vit-huge"], "unknown model 'vit-huge'; registered models: ["),
    (["--data", "imagenet-21k"], "unknown dataset 'imagenet-21k'; choose one of ["),
    (["--n-laplacian", "5"], "n_laplacian=5 exceeds n_heads=4; choose 0 <= n_laplacian <= 4"),
    (["--steps", "0"], "steps=0 must be > 0"),
    (["--steps", "-3"], "steps=-3 must be > 0"),
    (["--set", "learning_rate=1"], "unknown train config option(s) ['learning_rate']"),
    (["--precision", "fp16", "--device", "cpu"], "precision='fp16' needs a CUDA device"),
    (["--model", "gpt-tiny"], "model 'gpt-tiny' (family gpt) cannot do image-classification"),
    (["--data", "no/such/file.txt"], "no such file or folder"),
    (["--set", "model_overrides.n_laplacian=2"],
     "model_overrides.n_laplacian=2 contradicts n_laplacian=0"),
    (["--kernel", "triton"], "kernel='triton' is not valid; choose one of ['auto', 'sdpa', "),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    code = main(["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run"), *args])
    assert code == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "run").exists()  # nothing written for a refused run


def test_missing_data_names_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOKENGEO_FASHION_MNIST_DIR", str(tmp_path / "absent"))
    assert main(["train", "--data", "fashion-mnist", "--out", str(tmp_path / "run")]) == 2
    line = one_error_line(capsys)
    assert "data source 'fashion-mnist' not found" in line
    assert "apt-get install -y dataset-fashion-mnist" in line


def test_existing_out_without_resume_and_resume_without_run(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    assert main(["train", *TINY, "--out", str(tmp_path / "run")]) == 2
    assert "exists and is not empty; pass --resume" in one_error_line(capsys)
    assert main(["train", "--resume", "--out", str(tmp_path / "new")]) == 2
    assert "nothing to resume" in one_error_line(capsys)
    assert main(["train", "--resume"]) == 2
    assert "--resume needs --out" in one_error_line(capsys)


def test_config_file_errors(tmp_path, capsys):
    assert main(["train", str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in one_error_line(capsys)
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    assert main(["train", str(bad)]) == 2
    assert "is not valid TOML" in one_error_line(capsys)


def test_config_file_with_set_overrides(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('model = "vit-tiny"\ndata = "digits"\nsteps = 50\nlr = 0.01\nbatch_size = 16\n'
                   f'out = "{tmp_path / "run"}"\n[model_overrides]\nd_model = 32\nn_layers = 1\n')
    assert main(["train", str(cfg), "--steps", "2", "--set", "lr=2e-3",
                 "--set", "eval_every=0", "--quiet"]) == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["steps"], saved["lr"], saved["batch_size"]) == (2, 2e-3, 16)
    assert saved["model_overrides"] == {"d_model": 32, "n_layers": 1}
    assert "test: loss=" in capsys.readouterr().out


def test_resume_from_the_command_line_matches_uninterrupted(tmp_path, monkeypatch):
    run = ["train", *TINY, "--steps", "4", "--checkpoint-every", "2", "--eval-every", "2"]
    assert main([*run, "--out", str(tmp_path / "full")]) == 0
    original = Trainer.train_step

    def dies_at_step_4(self):
        if self.step == 3:
            raise KeyboardInterrupt
        return original(self)

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", dies_at_step_4)
        assert main([*run, "--out", str(tmp_path / "cut")]) == 130
    assert main(["train", "--resume", "--out", str(tmp_path / "cut"), "--quiet"]) == 0
    full, cut = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("full", "cut"))
    assert full["final"] == cut["final"]
    strip = [{k: v for k, v in json.loads(line).items() if k not in ("wall_s", "throughput")}
             for d in ("full", "cut") for line in (tmp_path / d / "metrics.jsonl").open()]
    assert strip[: len(strip) // 2] == strip[len(strip) // 2:]


def test_the_kernel_flag_reaches_the_model_and_is_saved_with_it(tmp_path, monkeypatch):
    """``--kernel`` sets the model config's kernel: the checkpoint's model runs it, and a
    resume may switch it (it changes speed, not what is computed)."""
    import tokengeo
    from tokengeo.nn.attention import HeadAttention

    out = tmp_path / "run"
    run = ["train", *TINY, "--n-laplacian", "2", "--steps", "4", "--checkpoint-every", "2",
           "--out", str(out), "--kernel", "compose"]
    original = Trainer.train_step

    def dies_at_step_4(self):
        if self.step == 3:
            raise KeyboardInterrupt
        return original(self)

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", dies_at_step_4)
        assert main(run) == 130
    model = tokengeo.load_model(out)
    assert model.config.kernel == "compose"
    assert {m.kernel for m in model.modules() if isinstance(m, HeadAttention)} == {"compose"}
    assert main(["train", "--resume", "--out", str(out), "--kernel", "in_place",
                 "--quiet"]) == 0
    model = tokengeo.load_model(out)
    assert {m.kernel for m in model.modules() if isinstance(m, HeadAttention)} == {"in_place"}
    loaded = tokengeo.load_run(out)  # the kernel does not size the model: no mismatch
    assert loaded.step == 4 and isinstance(loaded.model, torch.nn.Module)


def test_a_run_saved_without_a_kernel_field_loads(tmp_path):
    """A checkpoint whose model config has no ``kernel`` (saved before the field existed)
    rebuilds with ``auto``, and load_run does not mistake the missing field for a model the
    data sizes differently."""
    import tokengeo
    from tokengeo.train import sidecar as sc
    from tokengeo.train.checkpoint import STATE_FILE, latest_checkpoint

    out = tmp_path / "run"
    assert main(["train", *TINY, "--steps", "2", "--out", str(out)]) == 0
    values = json.loads((out / "config.json").read_text())
    del values["kernel"]
    (out / "config.json").write_text(json.dumps(values))
    state_file = latest_checkpoint(out / "checkpoints") / STATE_FILE
    state = json.loads(state_file.read_text())
    del state["model"]["config"]["kernel"], state["config"]["kernel"], state["digest"]
    state["digest"] = sc.digest(state)
    state_file.write_text(json.dumps(state))
    assert tokengeo.load_model(out).config.kernel == "auto"
    assert tokengeo.load_run(out).step == 2


def test_non_finite_loss_exits_2_naming_the_step(tmp_path, capsys, monkeypatch):
    original = ImageClassification.loss
    calls = {"n": 0}

    def loss(self, logits, batch):
        calls["n"] += 1
        return original(self, logits, batch) * (float("inf") if calls["n"] == 3 else 1.0)

    monkeypatch.setattr(ImageClassification, "loss", loss)
    code = main(["train", *TINY, "--steps", "5", "--checkpoint-every", "2", "--eval-every", "0",
                 "--out", str(tmp_path / "run")])
    assert code == 2
    line = one_error_line(capsys)
    assert "non-finite loss (inf) at step 3" in line and "step-00000002" in line


def test_python_dash_m_exits_2_without_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "CI": "1"}
    done = subprocess.run([sys.executable, "-m", "tokengeo", "train", "--steps", "0",
                           "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "tokengeo train: error: steps=0 must be > 0"
