"""Standard logging: tensorboard / csv / (fake) wandb loggers record what metrics.jsonl
records; curves.png at the end of every run; missing packages refused before training."""

from __future__ import annotations

import csv
import importlib.machinery
import json
import re
import sys
import types

import pytest

from tokengeo.cli import main
from tokengeo.errors import ConfigError, MissingDependencyError
from tokengeo.train import TrainConfig, Trainer, build_config
from tokengeo.train.curves import moving_average

TINY_VIT = {"d_model": 32, "n_layers": 1, "n_heads": 4, "mlp_ratio": 2.0}

pytestmark = pytest.mark.usefixtures("one_thread")


def config(out, **kw) -> TrainConfig:
    base = dict(model="vit-tiny", data="digits", steps=4, batch_size=16, warmup=1,
                eval_every=2, eval_batches=1, final_eval_batches=1, out=str(out),
                model_overrides=TINY_VIT)
    return TrainConfig(**{**base, **kw})


def train_losses(out) -> list[tuple[int, float]]:
    records = map(json.loads, (out / "metrics.jsonl").open())
    return [(r["step"], r["loss"]) for r in records if r["split"] == "train"]


def test_tensorboard_and_csv_record_the_loss(tmp_path):
    pytest.importorskip("tensorboard", reason="the 'log' extra (pip install 'tokengeo[log]')")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    Trainer(config(out, loggers=["tensorboard", "csv"]), progress=False).fit()
    expected = train_losses(out)
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    got = [(e.step, e.value) for e in events.Scalars("train/loss")]
    assert [s for s, _ in got] == [s for s, _ in expected] == [1, 2, 3, 4]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6)
    assert "val/accuracy" in events.Tags()["scalars"]
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    loss_rows = [(int(r["step"]), float(r["value"])) for r in rows
                 if (r["split"], r["metric"]) == ("train", "loss")]
    assert loss_rows == expected


def test_csv_of_a_resumed_run_matches_the_uninterrupted_one(tmp_path, monkeypatch):
    def rows(out):
        return [r for r in csv.DictReader((out / "metrics.csv").open())
                if r["metric"] not in ("wall_s", "throughput")]

    Trainer(config(tmp_path / "full", loggers=["csv"], checkpoint_every=2),
            progress=False).fit()
    original = Trainer.train_step

    def dies_at_step_3(self):
        if self.step == 2:
            raise KeyboardInterrupt
        return original(self)

    cut = config(tmp_path / "cut", loggers=["csv"], checkpoint_every=2)
    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", dies_at_step_3)
        with pytest.raises(KeyboardInterrupt):
            Trainer(cut, progress=False).fit()
    Trainer(cut, resume=True, progress=False).fit()
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")


class FakeRun:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def log(self, data, step=None):
        self.calls.append(("log", dict(data), step))

    def finish(self):
        self.calls.append(("finish",))


@pytest.fixture
def fake_wandb(monkeypatch):
    calls: list = []
    module = types.ModuleType("wandb")
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)

    def init(**kwargs):
        calls.append(("init", kwargs))
        return FakeRun(calls)

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


def test_wandb_logger_runs_offline_and_logs_the_loss(tmp_path, fake_wandb):
    out = tmp_path / "run"
    Trainer(config(out, loggers=["wandb"]), progress=False).fit()
    (_, init), *logs, last = fake_wandb
    assert init["mode"] == "offline" and init["dir"] == str(out)
    assert init["config"]["loggers"] == ["wandb"]
    assert last == ("finish",)
    losses = [(step, data["train/loss"]) for _, data, step in logs if "train/loss" in data]
    assert losses == train_losses(out)
    assert any("test/accuracy" in data for _, data, _ in logs)


def test_missing_logger_package_is_refused_before_training(tmp_path, capsys, monkeypatch):
    # wandb may be installed (the interp extra's transformer-lens depends on it): hide it
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real_find_spec(name, *a))
    with pytest.raises(MissingDependencyError, match="pip install wandb"):
        build_config(fields={"loggers": ["wandb"], "out": str(tmp_path / "x")})
    code = main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "2",
                 "--out", str(tmp_path / "run"), "--set", 'loggers=["wandb"]'])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "logger 'wandb' needs the 'wandb' package" in err and "\n" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("loggers, message", [
    (["tensorbord"], "unknown logger(s) ['tensorbord']; choose from"),
    ("csv", "must be a list of names"),
    (["csv", "csv"], "names a logger twice"),
])
def test_bad_loggers_setting(loggers, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        TrainConfig(loggers=loggers).validate()


def test_curves_png_at_the_end_of_every_run(tmp_path):
    pytest.importorskip("matplotlib", reason="the 'plot' extra draws curves.png")
    out = tmp_path / "run"
    summary = Trainer(config(out), progress=False).fit()
    png = out / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert summary["curves"] == {"path": str(png), "skipped": None}


def test_run_without_matplotlib_skips_curves_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "run"
    summary = Trainer(config(out), progress=False).fit()
    assert not (out / "curves.png").exists()
    assert summary["curves"]["path"] is None
    assert "matplotlib is not installed" in summary["curves"]["skipped"]
    assert "curves.png skipped: matplotlib is not installed" in capsys.readouterr().err
    saved = json.loads((out / "summary.json").read_text())
    assert saved["curves"] == summary["curves"]


def test_moving_average_by_hand():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2).tolist() == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([2.0, 4.0], 5).tolist() == [2.0, 3.0]
