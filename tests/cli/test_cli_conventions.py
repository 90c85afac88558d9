"""CLI conventions: --version, unknown families, progress of long commands, the warmup
clamp, similarity arguments checked before the model loads."""

from __future__ import annotations

import json

import pytest

import tokengeo
from tokengeo.cli import main
from tokengeo.train import TrainConfig, Trainer

TINY_VIT = {"d_model": 32, "n_layers": 1, "n_heads": 4, "mlp_ratio": 2.0}

pytestmark = pytest.mark.usefixtures("one_thread")


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tokengeo {tokengeo.__version__}"


def test_list_models_unknown_family_exits_2_naming_the_families(capsys):
    assert main(["list-models", "--family", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tokengeo list-models: error: unknown model family 'nope'")
    assert "'gpt'" in err and "'vit'" in err and "\n" not in err
    assert main(["list-models", "--family", "vit"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines and all(line.split()[1] == "vit" for line in lines)


def test_warmup_longer_than_the_run_is_clamped_and_said(tmp_path, capsys):
    cfg = TrainConfig(model="vit-tiny", data="digits", steps=3, warmup=100, batch_size=16,
                      eval_every=0, final_eval_batches=1, out=str(tmp_path / "run"),
                      model_overrides=TINY_VIT)
    trainer = Trainer(cfg, progress=False)
    assert trainer.schedule.warmup == 3
    summary = trainer.fit()
    assert "warmup=100 is longer than the run (steps=3); the warmup is clamped to 3 steps" \
        in capsys.readouterr().err
    assert any("clamped" in w for w in summary["warnings"])
    lrs = [r["lr"] for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").open())
           if r["split"] == "train"]
    assert lrs == pytest.approx([cfg.lr / 3, 2 * cfg.lr / 3, cfg.lr])  # reaches the peak


def _flow(tmp_path, *extra):
    return main(["flow", "--preset", "s2-oscillating", "--T", "0.05", "--dt", "0.01", "--n-paths", "1",
                 "--heads", "2", "--scaling-heads", "1,2", "--out", str(tmp_path / "flow"),
                 "--record-every", "1", "--no-figures", "--threads", "1", *extra])


def test_flow_shows_a_bar_per_head_count_on_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tokengeo.train.progress.bar_wanted", lambda is_main=True: True)
    assert _flow(tmp_path) == 0
    err = capsys.readouterr().err
    assert "H=1:" in err and "H=2:" in err and "/5 [" in err  # a bar per H, 5 time steps
    assert _flow(tmp_path, "--quiet", "--overwrite") == 0
    assert "/5 [" not in capsys.readouterr().err


@pytest.fixture
def no_model_loading(monkeypatch):
    def refuse(name):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr("tokengeo.probes.similarity.run.load_hf_encoder", refuse)


@pytest.mark.parametrize("args, message", [
    (["--corpus", "no-such-corpus"], "--corpus part 'no-such-corpus' is neither a known corpus"),
    (["--corpus", "shakespeare+missing/file.txt"], "'missing/file.txt'"),
    (["--samples", "0"], "samples=0 must be a whole number >= 1"),
    (["--seq-len", "1"], "--seq-len 1 leaves no token pairs"),
    (["--model", "no/such/folder"], "unknown model 'no/such/folder': use 'minilm', 'mpnet', 'smollm2-135m' or a local"),
])
def test_similarity_checks_arguments_before_loading_the_model(tmp_path, capsys, args, message,
                                                              no_model_loading):
    assert main(["similarity", "--out", str(tmp_path / "sim"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "sim").exists()

