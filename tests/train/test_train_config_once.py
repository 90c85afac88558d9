"""One ``tokengeo train`` validates its train config once, checks its model config once before
the data loads, builds it once after (sized from the data) and passes that object down to the
task and the model: no layer rebuilds it, and memory is checked once."""

from __future__ import annotations

import pytest

from tokengeo.cli import main
from tokengeo.models import registry
from tokengeo.train import config as train_config
from tokengeo.train.config import TrainConfig

TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "8", "--steps", "1",
        "--set", "model_overrides.d_model=16", "--set", "model_overrides.n_layers=1",
        "--set", "model_overrides.patch_size=2", "--set", "warmup=0", "--set", "eval_every=0",
        "--set", "final_eval_batches=1", "--quiet"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def counted(monkeypatch):
    """Every call of the config build, the train-config validation and the memory check."""
    calls = {"model config": [], "train validate": 0, "memory": [], "built from": []}
    build, validate = registry.ModelEntry.config, TrainConfig.validate
    memory, build_model = registry.check_model_memory, registry.build_model

    def count_build(self, **kw):
        cfg = build(self, **kw)
        calls["model config"].append(cfg)
        return cfg

    def count_validate(self):
        calls["train validate"] += 1
        return validate(self)

    def count_build_model(name, cfg, **kw):
        calls["built from"].append(cfg)
        return build_model(name, cfg, **kw)

    monkeypatch.setattr(registry.ModelEntry, "config", count_build)
    monkeypatch.setattr(TrainConfig, "validate", count_validate)
    monkeypatch.setattr(registry, "check_model_memory",
                        lambda *a: calls["memory"].append(a) or memory(*a))
    monkeypatch.setattr("tokengeo.train.trainer.build_model", count_build_model)
    return calls


def test_one_train_builds_its_model_config_once(tmp_path, monkeypatch, counted):
    """Before: four builds (validate, Trainer.__init__'s validate, build_task, and the
    registry's rebuild from a dict) and ten memory checks."""
    monkeypatch.setenv("CI", "1")
    assert main(["train", *TINY, "--out", str(tmp_path / "run")]) == 0
    assert counted["train validate"] == 1
    check, built = counted["model config"]  # the check before the data, the build after
    assert check.image_size == 2 and built.image_size == 8  # the digits are 8x8
    assert counted["built from"] == [built]  # the model is made from that very object
    assert [a[2] for a in counted["memory"]] == [train_config.TRAIN_BYTES_PER_PARAM]


def test_the_trainer_validates_only_a_config_that_changed(tmp_path, counted):
    from tokengeo.train.trainer import Trainer

    cfg = TrainConfig(model="vit-tiny", data="digits", steps=1, batch_size=8, warmup=0,
                      model_overrides={"d_model": 16, "n_layers": 1}, out=str(tmp_path / "a"))
    cfg.validate()
    trainer = Trainer(cfg, progress=False)
    assert counted["train validate"] == 1
    assert trainer.model.config is trainer.task.model_config
    cfg.out = str(tmp_path / "b")  # changed after validation: validated again
    Trainer(cfg, progress=False)
    assert counted["train validate"] == 2
