"""The training engine: schedule, config, task metrics, checkpoints, resume, guards."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from tokengeo.data import LanguageModelData, load_dataset
from tokengeo.errors import CheckpointError, ConfigError
from tokengeo.models.registry import create_model
from tokengeo.train import checkpoint as ckpt
from tokengeo.train.config import TrainConfig, build_config, parse_set
from tokengeo.train.progress import bar_wanted
from tokengeo.train.rng import rng_state, set_rng_state
from tokengeo.train.rundir import TIMING_KEYS
from tokengeo.train.schedule import WarmupCosine
from tokengeo.train.tasks import Batch, ImageClassification, LanguageModeling
from tokengeo.train.trainer import NonFiniteLossError, Trainer

TINY_VIT = {"d_model": 32, "n_layers": 2, "n_heads": 4, "mlp_ratio": 2.0}
TINY_GPT = {"d_model": 32, "n_layers": 2, "n_heads": 4, "block_size": 16, "dropout": 0.1}
TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(120))


pytestmark = pytest.mark.usefixtures("one_thread")


def vit_config(out, **kw) -> TrainConfig:
    base = dict(model="vit-tiny", data="digits", steps=6, batch_size=32, warmup=2,
                eval_every=3, eval_batches=2, checkpoint_every=3, out=str(out),
                model_overrides=TINY_VIT)
    return TrainConfig(**{**base, **kw})


def gpt_config(out, **kw) -> TrainConfig:
    text = out.parent / "corpus.txt"  # a user's text file: character-level LM
    text.write_text(TEXT)
    base = dict(model="gpt-tiny", data=str(text), steps=6, batch_size=8, warmup=2,
                eval_every=3, eval_batches=2, checkpoint_every=3, out=str(out),
                model_overrides=TINY_GPT, data_options={"tokenizer": "char"})
    return TrainConfig(**{**base, **kw})


def fit(cfg: TrainConfig, **kw) -> Trainer:
    trainer = Trainer(cfg, progress=False, **kw)
    trainer.fit()
    return trainer


def metric_records(out) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS} for line in lines]


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


# ---- schedule -----------------------------------------------------------------------


def test_schedule_warmup_then_cosine_by_hand():
    s = WarmupCosine(lr=1.0, min_lr=0.1, warmup=4, steps=14)
    assert [s(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s(4) == pytest.approx(1.0)
    assert s(9) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert s(14) == pytest.approx(0.1)
    rates = [s(i) for i in range(4, 15)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))


def test_schedule_refuses_other_state():
    s = WarmupCosine(1e-3, 1e-4, 10, 100)
    s.check_state(s.state_dict())
    with pytest.raises(CheckpointError, match="schedule"):
        s.check_state({**s.state_dict(), "steps": 200})


# ---- config -------------------------------------------------------------------------


def test_config_precedence_toml_fields_set(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('model = "gpt-tiny"\nlr = 0.01\nsteps = 50\n'
                    '[model_overrides]\nd_model = 64\nn_layers = 2\n')
    cfg = build_config(toml, {"steps": 7, "seed": None},
                       ["lr=3e-4", "model_overrides.d_model=32", "data=shakespeare-char"])
    assert (cfg.model, cfg.steps, cfg.lr, cfg.data) == ("gpt-tiny", 7, 3e-4, "shakespeare-char")
    assert cfg.model_overrides == {"d_model": 32, "n_layers": 2}
    assert cfg.seed == 0


def test_parse_set_types():
    got = parse_set(["a=1", "b=2.5", "c=true", "d=hello", 'e="x y"', "f.g=[1, 2]"])
    assert got == {"a": 1, "b": 2.5, "c": True, "d": "hello", "e": "x y", "f": {"g": [1, 2]}}
    with pytest.raises(ConfigError, match="key=value"):
        parse_set(["novalue"])


@pytest.mark.parametrize("override, message", [
    ({"steps": 0}, "steps=0 must be > 0"),
    ({"precision": "fp8"}, "precision='fp8' is not valid"),
    ({"n_laplacian": 9}, "n_laplacian=9 exceeds n_heads=4"),
    ({"model": "vit-huge"}, "unknown model 'vit-huge'"),
    ({"min_lr": 1.0}, "min_lr=1.0 must not exceed lr"),
    ({"model_overrides": {"d_modle": 3}}, "unknown vit-tiny option"),
    ({"stepz": 3}, "unknown train config option"),
])
def test_config_errors_name_the_field(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_config(None, {}, [], base=override)


@pytest.mark.parametrize("values, both", [
    ({"model_overrides": {"n_laplacian": 2}}, ("model_overrides.n_laplacian=2", "n_laplacian=0")),
    ({"n_laplacian": 1, "model_overrides": {"n_laplacian": 2}},
     ("model_overrides.n_laplacian=2", "n_laplacian=1")),
    ({"model_overrides": {"head_kind": "mixed"}},
     ("model_overrides.head_kind='mixed'", "head_kind='laplacian'")),
])
def test_model_overrides_cannot_contradict_top_level_fields(values, both):
    """Before, the top-level field silently won: n_laplacian=2 trained 0 Laplacian heads."""
    with pytest.raises(ConfigError) as err:
        build_config(None, {}, [], base=values)
    assert all(key in str(err.value) for key in both), str(err.value)


def test_model_overrides_may_repeat_a_top_level_field():
    cfg = build_config(None, {}, [], base={"n_laplacian": 2, "head_kind": "mixed",
                                           "model_overrides": {"n_laplacian": 2}})
    model_cfg = cfg.model_config()
    assert (model_cfg.n_laplacian, model_cfg.head_kind) == (2, "mixed")


def test_data_sizes_clash_with_overrides():
    with pytest.raises(ConfigError, match="num_classes=5 but the data needs 10"):
        TrainConfig(model_overrides={"num_classes": 5}).model_config(num_classes=10)


# ---- tasks and metrics -----------------------------------------------------------------


def test_classification_metrics_by_hand():
    data = load_dataset("digits")
    task = ImageClassification(data, None)
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0], [0.5, 0.2, 0.1], [0.0, 0.0, 0.0]])
    targets = torch.tensor([0, 1, 0, 2])
    batch = Batch(torch.zeros(4), targets)
    m = task.metrics(task.stats(logits, batch), "test")
    nll = [-math.log(math.exp(row[t]) / sum(math.exp(v) for v in row))
           for row, t in zip(logits.tolist(), targets.tolist(), strict=True)]
    assert m["loss"] == pytest.approx(sum(nll) / 4)
    assert m["accuracy"] == pytest.approx(2 / 4)  # rows 0 and 2 right; row 3 argmax is 0
    assert task.loss(logits, batch).item() == pytest.approx(sum(nll) / 4)


class _WordTokenizer:
    """Test double: token 0 = "a", 1 = "bb", 2 = "ccc" (multi-character tokens)."""

    name, vocab_size = "words", 3
    pieces = ["a", "bb", "ccc"]

    def encode(self, text):
        ids, i = [], 0
        while i < len(text):
            ids.append("abc".index(text[i]))
            i += len(self.pieces[ids[-1]])
        return ids

    def decode(self, ids):
        return "".join(self.pieces[int(i)] for i in ids)


def test_language_model_metrics_by_hand():
    tokens = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])  # "abbccc" x 4: 24 characters
    data = LanguageModelData("toy", tokens, tokens, 3, _WordTokenizer(), ["t"], ["v"],
                             train_characters=24, val_characters=24)
    task = LanguageModeling(data, create_model("gpt-tiny", vocab_size=3, block_size=4).config)
    logits = torch.randn(2, 4, 3)  # (B, T, V)
    targets = torch.tensor([[1, 2, 0, 1], [2, 2, 0, 0]])
    halves = [Batch(torch.zeros(1, 4), targets[i:i + 1]) for i in (0, 1)]  # summed stats
    m = task.metrics(task.stats(logits[:1], halves[0]) + task.stats(logits[1:], halves[1]), "val")
    nats = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
    assert m["loss"] == pytest.approx(nats / 8) and m["tokens"] == 8
    assert m["perplexity"] == pytest.approx(math.exp(nats / 8))
    assert m["bits_per_token"] == pytest.approx(nats / 8 / math.log(2))
    assert m["bits_per_char"] == pytest.approx(nats / 8 / math.log(2) / 2.0)  # 24 chars / 12
    assert task.loss(logits, Batch(torch.zeros(2, 4), targets)).item() == pytest.approx(nats / 8)


def test_task_must_fit_model_family(tmp_path):
    with pytest.raises(ConfigError, match="cannot do image-classification; use one of"):
        Trainer(vit_config(tmp_path / "r", model="gpt-tiny", model_overrides={}))
    assert not (tmp_path / "r").exists()


# ---- rng and checkpoints -----------------------------------------------------------------


def test_rng_state_roundtrips_through_json():
    import random

    import numpy as np

    state = json.loads(json.dumps(rng_state()))
    first = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(state)
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(first[0], again[0])
    assert np.array_equal(first[1], again[1]) and first[2] == again[2]


def _model_and_optimizer():
    model = create_model("gpt-tiny", d_model=32, n_layers=1, vocab_size=11, block_size=8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randint(11, (2, 8))).sum().backward()
    opt.step()
    return model, opt


def test_checkpoint_roundtrip_with_tied_weights(tmp_path):
    model, opt = _model_and_optimizer()
    path = ckpt.save_checkpoint(tmp_path, 5, model, opt, {"extra": [1, 2]})
    assert path.name == "step-00000005"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left
    c = ckpt.load_checkpoint(path)
    assert c.step == 5 and c.state["extra"] == [1, 2]
    assert c.state["aliases"] == {"lm_head.weight": "tok_emb.weight"}
    torch.manual_seed(1)
    model2, opt2 = _model_and_optimizer()
    ckpt.restore_model(model2, c)
    ckpt.restore_optimizer(opt2, c)
    assert_same_weights(model, model2)
    assert model2.lm_head.weight is model2.tok_emb.weight
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    for i in s1:
        for k in s1[i]:
            assert torch.equal(s1[i][k], s2[i][k])


def test_checkpoint_corrupt_incomplete_and_mismatched_are_refused(tmp_path):
    model, opt = _model_and_optimizer()
    path = ckpt.save_checkpoint(tmp_path, 1, model, opt, {})
    data = bytearray((path / ckpt.MODEL_FILE).read_bytes())
    data[-1] ^= 0xFF
    (path / ckpt.MODEL_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.safetensors does not match its recorded"):
        ckpt.load_checkpoint(path)
    path = ckpt.save_checkpoint(tmp_path, 2, model, opt, {}, keep=5)
    (path / ckpt.STATE_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        ckpt.load_checkpoint(path)
    (path / ckpt.STATE_FILE).unlink()
    with pytest.raises(CheckpointError, match="state.json is missing"):
        ckpt.load_checkpoint(path)
    path = ckpt.save_checkpoint(tmp_path, 3, model, opt, {}, keep=5)
    other = create_model("gpt-tiny", d_model=64, n_layers=1, vocab_size=11, block_size=8)
    with pytest.raises(CheckpointError, match="does not fit the model"):
        ckpt.restore_model(other, ckpt.load_checkpoint(path))


def test_interrupted_checkpoint_write_leaves_nothing(tmp_path, monkeypatch):
    model, opt = _model_and_optimizer()
    ckpt.save_checkpoint(tmp_path, 1, model, opt, {})

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "write_json", fail)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_checkpoint(tmp_path, 2, model, opt, {})
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000001"]


def test_prune_keeps_the_newest(tmp_path):
    model, opt = _model_and_optimizer()
    for step in (1, 2, 3, 4):
        ckpt.save_checkpoint(tmp_path, step, model, opt, {}, keep=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step-00000003", "step-00000004"]


# ---- the trainer ---------------------------------------------------------------------------


def test_run_directory_outputs(tmp_path):
    cfg = vit_config(tmp_path / "run")
    trainer = fit(cfg)
    out = tmp_path / "run"
    assert json.loads((out / "config.json").read_text()) == cfg.to_dict()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["step"] == 6 and summary["config"] == cfg.to_dict()
    assert summary["parameters"] == {"total": trainer.model.num_parameters(),
                                     "encoder": trainer.model.num_parameters(only_blocks=True)}
    assert set(summary["final"]) == {"val", "test"}
    assert summary["final"]["test"]["examples"] == len(trainer.data.test)
    assert summary["model"]["config"]["image_size"] == 8  # from the data
    records = metric_records(out)
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in records if r["split"] == "val"] == [3, 6]
    kept = sorted(p.name for p in (out / "checkpoints").iterdir())  # the last 2 by default
    assert kept == ["step-00000003", "step-00000006"]


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    a = fit(vit_config(tmp_path / "a", steps=3, checkpoint_every=0))
    b = fit(vit_config(tmp_path / "b", steps=3, checkpoint_every=0))
    c = fit(vit_config(tmp_path / "c", steps=3, checkpoint_every=0, seed=1))
    assert_same_weights(a.model, b.model)
    assert metric_records(tmp_path / "a") == metric_records(tmp_path / "b")
    assert not torch.equal(a.model.head.weight, c.model.head.weight)


def _interrupt_at(monkeypatch, step: int) -> None:
    """Make the trainer die (as if killed) when it is about to run ``step``."""
    original = Trainer.train_step

    def train_step(self):
        if self.step + 1 == step:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)


@pytest.mark.parametrize("make_config", [vit_config, gpt_config], ids=["vit-digits", "gpt-text"])
def test_resume_matches_uninterrupted_run(tmp_path, monkeypatch, make_config):
    full = fit(make_config(tmp_path / "full"))
    cfg = make_config(tmp_path / "cut")
    with monkeypatch.context() as m:
        _interrupt_at(m, 5)  # after the checkpoint at step 3 and the log of step 4
        with pytest.raises(KeyboardInterrupt):
            fit(cfg)
    out = tmp_path / "cut"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-00000003"]
    assert max(r["step"] for r in metric_records(out)) == 4
    resumed = fit(cfg, resume=True)
    assert_same_weights(full.model, resumed.model)
    assert metric_records(tmp_path / "full") == metric_records(out)
    final = [json.loads((tmp_path / d / "summary.json").read_text())["final"]
             for d in ("full", "cut")]
    assert final[0] == final[1]


def test_resume_refuses_changed_config_and_corrupt_checkpoint(tmp_path):
    fit(vit_config(tmp_path / "run", steps=3, eval_every=0))
    with pytest.raises(CheckpointError, match=r"lr: 0.001 -> 0.002"):
        Trainer(vit_config(tmp_path / "run", steps=3, eval_every=0, lr=2e-3), resume=True)
    weights = tmp_path / "run" / "checkpoints" / "step-00000003" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    with pytest.raises(CheckpointError, match="corrupt"):
        Trainer(vit_config(tmp_path / "run", steps=3, eval_every=0), resume=True)


def test_existing_run_directory_is_not_overwritten(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not empty; pass --resume"):
        Trainer(vit_config(tmp_path / "run"))
    with pytest.raises(ConfigError, match="nothing to resume"):
        Trainer(vit_config(tmp_path / "other"), resume=True)


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    original = ImageClassification.loss
    calls = {"n": 0}

    def loss(self, logits, batch):
        calls["n"] += 1
        value = original(self, logits, batch)
        return value * float("nan") if calls["n"] == 5 else value

    monkeypatch.setattr(ImageClassification, "loss", loss)
    cfg = vit_config(tmp_path / "run", checkpoint_every=2, eval_every=0)
    trainer = Trainer(cfg, progress=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    expected = r"non-finite loss \(nan\) at step 5;.*step-00000004"
    with pytest.raises(NonFiniteLossError, match=expected):
        trainer.fit()
    kept = sorted(p.name for p in (tmp_path / "run/checkpoints").iterdir())
    assert kept == ["step-00000002", "step-00000004"]
    assert max(r["step"] for r in metric_records(tmp_path / "run")) == 4
    assert all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())
    assert not all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def test_bf16_autocast_trains_on_cpu(tmp_path):
    trainer = fit(vit_config(tmp_path / "run", steps=2, precision="bf16", eval_every=0,
                             checkpoint_every=0, final_eval_batches=1))
    losses = [r["loss"] for r in metric_records(tmp_path / "run") if r["split"] == "train"]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert trainer.autocast_dtype == torch.bfloat16


def test_text_classification_task_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path / "cache"))
    rows = ["text,label"] + [f"{w} {w} item {i},{lab}" for i in range(60)
                             for w, lab in (("apple pie", "food"), ("goal kick", "sport"))]
    (tmp_path / "topics.csv").write_text("\n".join(rows) + "\n")
    cfg = TrainConfig(model="encoder-tiny", data=str(tmp_path / "topics.csv"), steps=3,
                      batch_size=16, warmup=1, eval_every=0, out=str(tmp_path / "run"),
                      data_options={"tokenizer": "bpe", "bpe_vocab_size": 300, "max_len": 16},
                      model_overrides={"d_model": 32, "n_layers": 1})
    trainer = fit(cfg)
    assert trainer.model.config.num_classes == 2 and trainer.model.config.vocab_size <= 300
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert 0.0 <= summary["final"]["test"]["accuracy"] <= 1.0
    assert summary["task"] == "text-classification"


def test_progress_bar_is_quiet_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "1")
    assert not bar_wanted(True)
    monkeypatch.delenv("CI")
    assert not bar_wanted(False)  # never on ranks other than 0


def test_resume_of_finished_run_changes_nothing(tmp_path):
    cfg = vit_config(tmp_path / "run", steps=3, eval_every=0)
    first = fit(cfg)
    before = metric_records(tmp_path / "run")
    final = json.loads((tmp_path / "run/summary.json").read_text())["final"]
    again = fit(cfg, resume=True)
    assert again.step == 3
    assert_same_weights(first.model, again.model)
    assert metric_records(tmp_path / "run") == before
    assert json.loads((tmp_path / "run/summary.json").read_text())["final"] == final

